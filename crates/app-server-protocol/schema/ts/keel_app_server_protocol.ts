// keel's app-server protocol, generated from keel's Rust types by
// `keel app-server generate-ts`. Do not edit.

export type Account = ({ type: "apiKey" });

export type ApprovalPolicyName = "untrusted" | "on-request" | "never";

export type AskForApproval = (ApprovalPolicyName) | ({ granular: unknown });

export type ClientInfo = { name: string; title?: string | null; version: string };

export type CodexErrorInfo = ("contextWindowExceeded" | "usageLimitExceeded" | "rateLimitExceeded" | "serverOverloaded" | "modelNotFound" | "internalServerError" | "unauthorized" | "badRequest" | "sandboxError" | "other") | ({ httpConnectionFailed: { httpStatusCode?: number | null } }) | ({ responseStreamConnectionFailed: { httpStatusCode?: number | null } }) | ({ responseStreamDisconnected: { httpStatusCode?: number | null } }) | ({ responseTooManyFailedAttempts: { httpStatusCode?: number | null } });

export type CommandAction = ({ command: string; name: string; path: string; type: "read" }) | ({ command: string; path?: string | null; type: "listFiles" }) | ({ command: string; path?: string | null; query?: string | null; type: "search" }) | ({ command: string; type: "unknown" });

export type CommandExecOutputDeltaNotification = { capReached: boolean; deltaBase64: string; processId: string; stream: CommandExecOutputStream };

export type CommandExecOutputStream = "stdout" | "stderr";

export type CommandExecParams = { command: Array<string>; cwd?: string | null; disableOutputCap?: boolean; disableTimeout?: boolean; env?: { [key: string]: string | null } | null; outputBytesCap?: number | null; processId?: string | null; sandboxPolicy?: unknown; size?: (CommandExecTerminalSize) | (null); streamStdin?: boolean; streamStdoutStderr?: boolean; timeoutMs?: number | null; tty?: boolean };

export type CommandExecResizeParams = { processId: string; size: CommandExecTerminalSize };

export type CommandExecResponse = { exitCode: number; stderr: string; stdout: string };

export type CommandExecTerminalSize = { cols: number; rows: number };

export type CommandExecTerminateParams = { processId: string };

export type CommandExecWriteParams = { closeStdin?: boolean; deltaBase64?: string | null; processId: string };

export type CommandExecutionRequestApprovalParams = { command?: string | null; commandActions?: Array<CommandAction> | null; cwd?: string | null; itemId: string; proposedExecpolicyAmendment?: Array<string> | null; reason?: string | null; startedAtMs: number; threadId: string; turnId: string };

export type ConfigReadParams = { cwd?: string | null; includeLayers?: boolean };

export type ConfigReadResponse = { config: { [key: string]: unknown }; layers?: Array<unknown> | null; origins: { [key: string]: unknown } };

export type CwdsParams = { cwds?: Array<string> };

export type DeprecationNoticeNotification = { details?: string | null; summary: string };

export type EmptyResponse = { [key: string]: unknown };

export type ErrorNotification = { error: TurnError; threadId: string; turnId: string; willRetry: boolean };

export type FileChangeRequestApprovalParams = { grantRoot?: string | null; itemId: string; reason?: string | null; startedAtMs: number; threadId: string; turnId: string };

export type FileUpdateChange = { diff: string; kind: PatchChangeKind; path: string };

export type FsChangedNotification = { changedPaths: Array<string>; watchId: string };

export type FsCopyParams = { destinationPath: string; recursive?: boolean; sourcePath: string };

export type FsCreateDirectoryParams = { path: string; recursive?: boolean | null };

export type FsGetMetadataResponse = { createdAtMs: number; isDirectory: boolean; isFile: boolean; isSymlink: boolean; modifiedAtMs: number };

export type FsPathParams = { path: string };

export type FsReadDirectoryEntry = { fileName: string; isDirectory: boolean; isFile: boolean };

export type FsReadDirectoryResponse = { entries: Array<FsReadDirectoryEntry> };

export type FsReadFileResponse = { dataBase64: string };

export type FsRemoveParams = { force?: boolean | null; path: string; recursive?: boolean | null };

export type FsUnwatchParams = { watchId: string };

export type FsWatchParams = { path: string; watchId: string };

export type FsWatchResponse = { path: string };

export type FsWriteFileParams = { dataBase64: string; path: string };

export type GetAccountResponse = { account?: (Account) | (null); requiresOpenaiAuth: boolean; userId?: string | null };

export type GitInfo = { branch?: string | null; originUrl?: string | null; sha?: string | null };

export type HooksListEntry = { cwd: string; errors: Array<unknown>; hooks: Array<unknown>; warnings: Array<unknown> };

export type HooksListResponse = { data: Array<HooksListEntry> };

export type InitializeCapabilities = { experimentalApi?: boolean; extensions?: unknown; optOutNotificationMethods?: Array<string> | null; requestAttestation?: boolean };

export type InitializeParams = { capabilities?: (InitializeCapabilities) | (null); clientInfo: ClientInfo };

export type InitializeResponse = { codexHome: string; platformFamily: string; platformOs: string; userAgent: string };

export type ItemCompletedNotification = { completedAtMs: number; item: ThreadItem; threadId: string; turnId: string };

export type ItemDeltaNotification = { delta: string; itemId: string; threadId: string; turnId: string };

export type ItemStartedNotification = { item: ThreadItem; startedAtMs: number; threadId: string; turnId: string };

export type ItemStatus = "inProgress" | "completed" | "failed" | "declined";

export type ListMcpServerStatusParams = { cursor?: string | null; detail?: string | null; limit?: number | null; serverName?: string | null; threadId?: string | null };

export type ListMcpServerStatusResponse = { data: Array<McpServerStatus>; nextCursor?: string | null };

export type McpResourceReadParams = { server: string; threadId?: string | null; uri: string };

export type McpResourceReadResponse = { contents: Array<unknown> };

export type McpServerElicitationRequestParams = { message: string; mode: string; requestedSchema: unknown; serverName: string; threadId: string; turnId?: string | null };

export type McpServerOauthLoginCompletedNotification = { error?: string | null; loginId?: string | null; name: string; success: boolean; threadId?: string | null };

export type McpServerOauthLoginParams = { clientRegistration?: string | null; name: string; scopes?: Array<string> | null; threadId?: string | null; timeoutSecs?: number | null };

export type McpServerOauthLoginResponse = { authorizationUrl: string; loginId?: string | null };

export type McpServerStatus = { authStatus: string; name: string; resourceTemplates: Array<unknown>; resources: Array<unknown>; runtimeStatus?: string | null; tools: { [key: string]: unknown }; toolsError?: string | null };

export type McpServerStatusUpdatedNotification = { error?: string | null; name: string; status: string; threadId?: string | null };

export type McpServerToolCallParams = { arguments?: unknown; server: string; threadId: string; tool: string };

export type McpServerToolCallResponse = { content: Array<unknown>; isError?: boolean | null; structuredContent?: unknown };

export type McpToolCallError = { message: string };

export type McpToolCallProgressNotification = { itemId: string; message: string; threadId: string; turnId: string };

export type McpToolCallResult = { content: Array<unknown>; structuredContent?: unknown };

export type Model = { defaultReasoningEffort: string; description: string; displayName: string; hidden: boolean; id: string; inputModalities: Array<string>; isDefault: boolean; model: string; supportedReasoningEfforts: Array<ReasoningEffortOption>; upgrade?: string | null };

export type ModelListParams = { cursor?: string | null; includeHidden?: boolean | null; limit?: number | null; modelProvider?: string | null };

export type ModelListResponse = { data: Array<Model>; nextCursor?: string | null };

export type ModelProviderInfo = { baseUrl?: string | null; canEdit: boolean; id: string; name: string };

export type ModelProviderListResponse = { canChangeDefault: boolean; data: Array<ModelProviderInfo>; defaultProviderId: string };

export type PatchChangeKind = ({ type: "add" }) | ({ type: "delete" }) | ({ move_path?: string | null; type: "update" });

export type PermissionProfileListParams = { cursor?: string | null; cwd?: string | null };

export type PermissionProfileListResponse = { data: Array<PermissionProfileSummary>; nextCursor?: string | null };

export type PermissionProfileSummary = { allowed: boolean; description?: string | null; id: string };

export type ReasoningEffortOption = { description: string; reasoningEffort: string };

export type ReasoningSummaryPartAddedNotification = { itemId: string; summaryIndex: number; threadId: string; turnId: string };

export type ReasoningSummaryTextDeltaNotification = { delta: string; itemId: string; summaryIndex: number; threadId: string; turnId: string };

export type ReasoningTextDeltaNotification = { contentIndex: number; delta: string; itemId: string; threadId: string; turnId: string };

export type RequestId = (number) | (string);

export type SandboxMode = "read-only" | "workspace-write" | "danger-full-access";

export type SandboxPolicy = ({ type: "dangerFullAccess" }) | ({ networkAccess?: boolean; type: "readOnly" }) | ({ networkAccess?: unknown; type: "externalSandbox" }) | ({ excludeSlashTmp?: boolean; excludeTmpdirEnvVar?: boolean; networkAccess?: boolean; type: "workspaceWrite"; writableRoots?: Array<string> });

export type ServerRequestResolvedNotification = { requestId: RequestId; threadId: string };

export type SkillsListEntry = { cwd: string; errors: Array<unknown>; skills: Array<unknown> };

export type SkillsListResponse = { data: Array<SkillsListEntry> };

export type SortDirection = "asc" | "desc";

export type Thread = { agentNickname?: string | null; agentRole?: string | null; cliVersion: string; createdAt: number; cwd: string; ephemeral: boolean; forkedFromId?: string | null; gitInfo?: (GitInfo) | (null); historyMode?: (ThreadHistoryMode); id: string; model?: string | null; modelProvider: string; name?: string | null; originator?: string | null; parentThreadId?: string | null; path?: string | null; preview: string; projectId?: string | null; reasoningEffort?: string | null; sessionId: string; source: string; status: ThreadStatus; threadSource?: string | null; turns: Array<Turn>; updatedAt: number };

export type ThreadActiveFlag = "waitingOnApproval" | "waitingOnUserInput";

export type ThreadForkParams = { approvalPolicy?: (AskForApproval) | (null); baseInstructions?: string | null; config?: { [key: string]: unknown } | null; cwd?: string | null; developerInstructions?: string | null; ephemeral?: boolean; excludeTurns?: boolean; lastTurnId?: string | null; model?: string | null; modelProvider?: string | null; path?: string | null; permissions?: string | null; sandbox?: (SandboxMode) | (null); threadId: string };

export type ThreadHistoryMode = "legacy" | "paginated";

export type ThreadIdNotification = { threadId: string };

export type ThreadIdParams = { threadId: string };

export type ThreadItem = ({ clientId?: string | null; content: Array<UserInput>; id: string; type: "userMessage" }) | ({ id: string; phase?: string | null; text: string; type: "agentMessage" }) | ({ content: Array<string>; id: string; summary: Array<string>; type: "reasoning" }) | ({ aggregatedOutput?: string | null; command: string; commandActions: Array<CommandAction>; cwd: string; durationMs?: number | null; exitCode?: number | null; id: string; processId?: string | null; source: string; status: ItemStatus; type: "commandExecution" }) | ({ changes: Array<FileUpdateChange>; id: string; status: ItemStatus; type: "fileChange" }) | ({ arguments: unknown; contentItems?: Array<unknown> | null; durationMs?: number | null; id: string; namespace?: string | null; status: ToolCallStatus; success?: boolean | null; tool: string; type: "dynamicToolCall" }) | ({ arguments: unknown; durationMs?: number | null; error?: (McpToolCallError) | (null); id: string; result?: (McpToolCallResult) | (null); server: string; status: ToolCallStatus; tool: string; type: "mcpToolCall" }) | ({ id: string; text: string; type: "plan" }) | ({ id: string; type: "contextCompaction" });

export type ThreadItemEntry = { completedAtMs?: number | null; item: ThreadItem; startedAtMs?: number | null; turnId: string };

export type ThreadItemsListAnchor = ({ itemId: string; type: "item" });

export type ThreadItemsListCursor = (string) | (ThreadItemsListAnchor);

export type ThreadItemsListParams = { cursor?: (ThreadItemsListCursor) | (null); deferOutput?: unknown; limit?: number | null; sortDirection?: (SortDirection) | (null); threadId: string; turnId?: string | null };

export type ThreadItemsListResponse = { backwardsCursor?: string | null; data: Array<ThreadItemEntry>; nextCursor?: string | null };

export type ThreadListCwdFilter = (string) | (Array<string>);

export type ThreadListParams = { archived?: boolean | null; cursor?: string | null; cwd?: (ThreadListCwdFilter) | (null); limit?: number | null; modelProviders?: Array<string> | null; searchTerm?: string | null; sortDirection?: (SortDirection) | (null); sortKey?: (ThreadSortKey) | (null) };

export type ThreadListResponse = { backwardsCursor?: string | null; data: Array<Thread>; nextCursor?: string | null };

export type ThreadLoadedListParams = { cursor?: string | null; limit?: number | null };

export type ThreadLoadedListResponse = { data: Array<string>; nextCursor?: string | null };

export type ThreadMetadataGitInfoUpdateParams = { branch?: string | null; originUrl?: string | null; sha?: string | null };

export type ThreadMetadataUpdateParams = { gitInfo?: (ThreadMetadataGitInfoUpdateParams) | (null); threadId: string };

export type ThreadNameUpdatedNotification = { threadId: string; threadName?: string | null };

export type ThreadReadParams = { includeTurns?: boolean; threadId: string };

export type ThreadReadResponse = { thread: Thread };

export type ThreadResponse = { thread: Thread };

export type ThreadResumeParams = { approvalPolicy?: (AskForApproval) | (null); approvalsReviewer?: string | null; baseInstructions?: string | null; config?: { [key: string]: unknown } | null; cwd?: string | null; developerInstructions?: string | null; excludeTurns?: boolean; model?: string | null; modelProvider?: string | null; permissions?: string | null; sandbox?: (SandboxMode) | (null); threadId: string };

export type ThreadSessionResponse = { approvalPolicy: AskForApproval; approvalsReviewer: string; cwd: string; instructionSources: Array<string>; model: string; modelProvider: string; reasoningEffort?: string | null; sandbox: SandboxPolicy; serviceTier?: string | null; thread: Thread };

export type ThreadSetNameParams = { name: string; threadId: string };

export type ThreadSortKey = "created_at" | "updated_at" | "recency_at" | "section_position";

export type ThreadStartParams = { approvalPolicy?: (AskForApproval) | (null); approvalsReviewer?: string | null; baseInstructions?: string | null; config?: { [key: string]: unknown } | null; cwd?: string | null; developerInstructions?: string | null; ephemeral?: boolean | null; model?: string | null; modelProvider?: string | null; permissions?: string | null; sandbox?: (SandboxMode) | (null); serviceName?: string | null; serviceTier?: string | null; threadSource?: string | null };

export type ThreadStartedNotification = { thread: Thread };

export type ThreadStatus = ({ type: "notLoaded" }) | ({ type: "idle" }) | ({ type: "systemError" }) | ({ activeFlags: Array<ThreadActiveFlag>; type: "active" });

export type ThreadStatusChangedNotification = { status: ThreadStatus; threadId: string };

export type ThreadTokenUsage = { last: TokenUsageBreakdown; modelContextWindow?: number | null; total: TokenUsageBreakdown };

export type ThreadTokenUsageUpdatedNotification = { threadId: string; tokenUsage: ThreadTokenUsage; turnId: string };

export type ThreadTurnsListParams = { cursor?: string | null; limit?: number | null; sortDirection?: (SortDirection) | (null); threadId: string };

export type ThreadTurnsListResponse = { backwardsCursor?: string | null; data: Array<Turn>; nextCursor?: string | null };

export type ThreadUnsubscribeResponse = { status: ThreadUnsubscribeStatus };

export type ThreadUnsubscribeStatus = "notLoaded" | "notSubscribed" | "unsubscribed";

export type TokenUsageBreakdown = { cacheWriteInputTokens: number; cachedInputTokens: number; inputTokens: number; outputTokens: number; reasoningOutputTokens: number; totalTokens: number };

export type ToolCallStatus = "inProgress" | "completed" | "failed";

export type Turn = { completedAt?: number | null; durationMs?: number | null; error?: (TurnError) | (null); id: string; items: Array<ThreadItem>; itemsView: TurnItemsView; rootTurnId?: string | null; startedAt?: number | null; status: TurnStatus };

export type TurnDiffUpdatedNotification = { diff: string; threadId: string; turnId: string };

export type TurnError = { additionalDetails?: string | null; codexErrorInfo?: (CodexErrorInfo) | (null); message: string };

export type TurnInterruptParams = { threadId: string; turnId: string };

export type TurnItemsView = "notLoaded" | "summary" | "full";

export type TurnNotification = { threadId: string; turn: Turn };

export type TurnPlanStep = { status: TurnPlanStepStatus; step: string };

export type TurnPlanStepStatus = "pending" | "inProgress" | "completed";

export type TurnPlanUpdatedNotification = { explanation?: string | null; plan: Array<TurnPlanStep>; threadId: string; turnId: string };

export type TurnStartParams = { approvalPolicy?: (AskForApproval) | (null); clientUserMessageId?: string | null; cwd?: string | null; effort?: string | null; input: Array<UserInput>; model?: string | null; outputSchema?: unknown; permissions?: string | null; sandboxPolicy?: (SandboxPolicy) | (null); summary?: unknown; threadId: string };

export type TurnStartResponse = { turn: Turn };

export type TurnStatus = "completed" | "interrupted" | "failed" | "inProgress";

export type TurnSteerParams = { clientUserMessageId?: string | null; expectedTurnId: string; input: Array<UserInput>; threadId: string };

export type TurnSteerResponse = { turnId: string };

export type UserInput = ({ text: string; text_elements?: Array<unknown>; type: "text" }) | ({ detail?: unknown; fileId?: string | null; type: "image"; url?: string | null }) | ({ detail?: unknown; path: string; type: "localImage" }) | ({ fileId?: string | null; type: "audio"; url?: string | null }) | ({ path: string; type: "localAudio" }) | ({ name: string; path: string; type: "skill" }) | ({ name: string; path: string; type: "mention" });

export type WarningNotification = { message: string; threadId?: string | null };

export type ClientRequest = ({ id: RequestId; method: "initialize"; params: InitializeParams }) | ({ id: RequestId; method: "thread/start"; params: ThreadStartParams }) | ({ id: RequestId; method: "thread/resume"; params: ThreadResumeParams }) | ({ id: RequestId; method: "thread/fork"; params: ThreadForkParams }) | ({ id: RequestId; method: "thread/list"; params: ThreadListParams }) | ({ id: RequestId; method: "thread/read"; params: ThreadReadParams }) | ({ id: RequestId; method: "thread/turns/list"; params: ThreadTurnsListParams }) | ({ id: RequestId; method: "thread/items/list"; params: ThreadItemsListParams }) | ({ id: RequestId; method: "thread/loaded/list"; params: ThreadLoadedListParams }) | ({ id: RequestId; method: "thread/name/set"; params: ThreadSetNameParams }) | ({ id: RequestId; method: "thread/unsubscribe"; params: ThreadIdParams }) | ({ id: RequestId; method: "thread/archive"; params: ThreadIdParams }) | ({ id: RequestId; method: "thread/unarchive"; params: ThreadIdParams }) | ({ id: RequestId; method: "thread/delete"; params: ThreadIdParams }) | ({ id: RequestId; method: "thread/metadata/update"; params: ThreadMetadataUpdateParams }) | ({ id: RequestId; method: "thread/compact/start"; params: ThreadIdParams }) | ({ id: RequestId; method: "turn/start"; params: TurnStartParams }) | ({ id: RequestId; method: "turn/steer"; params: TurnSteerParams }) | ({ id: RequestId; method: "turn/interrupt"; params: TurnInterruptParams }) | ({ id: RequestId; method: "fs/readFile"; params: FsPathParams }) | ({ id: RequestId; method: "fs/writeFile"; params: FsWriteFileParams }) | ({ id: RequestId; method: "fs/getMetadata"; params: FsPathParams }) | ({ id: RequestId; method: "fs/readDirectory"; params: FsPathParams }) | ({ id: RequestId; method: "fs/createDirectory"; params: FsCreateDirectoryParams }) | ({ id: RequestId; method: "fs/remove"; params: FsRemoveParams }) | ({ id: RequestId; method: "fs/copy"; params: FsCopyParams }) | ({ id: RequestId; method: "fs/watch"; params: FsWatchParams }) | ({ id: RequestId; method: "fs/unwatch"; params: FsUnwatchParams }) | ({ id: RequestId; method: "command/exec"; params: CommandExecParams }) | ({ id: RequestId; method: "command/exec/write"; params: CommandExecWriteParams }) | ({ id: RequestId; method: "command/exec/terminate"; params: CommandExecTerminateParams }) | ({ id: RequestId; method: "command/exec/resize"; params: CommandExecResizeParams }) | ({ id: RequestId; method: "model/list"; params: ModelListParams }) | ({ id: RequestId; method: "modelProvider/list"; params: EmptyResponse }) | ({ id: RequestId; method: "config/read"; params: ConfigReadParams }) | ({ id: RequestId; method: "account/read"; params: EmptyResponse }) | ({ id: RequestId; method: "skills/list"; params: CwdsParams }) | ({ id: RequestId; method: "permissionProfile/list"; params: PermissionProfileListParams }) | ({ id: RequestId; method: "hooks/list"; params: CwdsParams }) | ({ id: RequestId; method: "mcpServerStatus/list"; params: ListMcpServerStatusParams }) | ({ id: RequestId; method: "mcpServer/tool/call"; params: McpServerToolCallParams }) | ({ id: RequestId; method: "config/mcpServer/reload"; params: EmptyResponse }) | ({ id: RequestId; method: "mcpServer/resource/read"; params: McpResourceReadParams }) | ({ id: RequestId; method: "mcpServer/oauth/login"; params: McpServerOauthLoginParams });

export type ServerNotification = ({ method: "error"; params: ErrorNotification }) | ({ method: "warning"; params: WarningNotification }) | ({ method: "deprecationNotice"; params: DeprecationNoticeNotification }) | ({ method: "thread/started"; params: ThreadStartedNotification }) | ({ method: "thread/status/changed"; params: ThreadStatusChangedNotification }) | ({ method: "thread/name/updated"; params: ThreadNameUpdatedNotification }) | ({ method: "thread/archived"; params: ThreadIdNotification }) | ({ method: "thread/unarchived"; params: ThreadIdNotification }) | ({ method: "thread/closed"; params: ThreadIdNotification }) | ({ method: "thread/deleted"; params: ThreadIdNotification }) | ({ method: "thread/tokenUsage/updated"; params: ThreadTokenUsageUpdatedNotification }) | ({ method: "turn/started"; params: TurnNotification }) | ({ method: "turn/completed"; params: TurnNotification }) | ({ method: "turn/diff/updated"; params: TurnDiffUpdatedNotification }) | ({ method: "turn/plan/updated"; params: TurnPlanUpdatedNotification }) | ({ method: "item/started"; params: ItemStartedNotification }) | ({ method: "item/completed"; params: ItemCompletedNotification }) | ({ method: "item/agentMessage/delta"; params: ItemDeltaNotification }) | ({ method: "item/reasoning/summaryPartAdded"; params: ReasoningSummaryPartAddedNotification }) | ({ method: "item/reasoning/summaryTextDelta"; params: ReasoningSummaryTextDeltaNotification }) | ({ method: "item/reasoning/textDelta"; params: ReasoningTextDeltaNotification }) | ({ method: "item/commandExecution/outputDelta"; params: ItemDeltaNotification }) | ({ method: "serverRequest/resolved"; params: ServerRequestResolvedNotification }) | ({ method: "command/exec/outputDelta"; params: CommandExecOutputDeltaNotification }) | ({ method: "fs/changed"; params: FsChangedNotification }) | ({ method: "mcpServer/startupStatus/updated"; params: McpServerStatusUpdatedNotification }) | ({ method: "item/mcpToolCall/progress"; params: McpToolCallProgressNotification }) | ({ method: "mcpServer/oauthLogin/completed"; params: McpServerOauthLoginCompletedNotification });

export type ServerRequest = ({ id: number; method: "item/commandExecution/requestApproval"; params: CommandExecutionRequestApprovalParams }) | ({ id: number; method: "item/fileChange/requestApproval"; params: FileChangeRequestApprovalParams }) | ({ id: number; method: "mcpServer/elicitation/request"; params: McpServerElicitationRequestParams });

