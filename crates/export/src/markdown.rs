//! Markdown to HTML for the export, with raw HTML shown as text.
//!
//! Uses `pulldown-cmark` (tables, strikethrough, task lists). Raw HTML
//! blocks and inline HTML become escaped text; fenced code goes through
//! [`crate::highlight`]; images that are not `data:` URLs become links (a
//! page that must make no network request cannot load them); links with a
//! script scheme lose their target.

use pulldown_cmark::{CodeBlockKind, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

use crate::highlight::{escape, highlight};

fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    !(lower.starts_with("javascript:")
        || lower.starts_with("vbscript:")
        || lower.starts_with("data:"))
}

/// Renders Markdown as HTML.
pub fn render(text: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut events: Vec<Event> = Vec::new();
    let mut code: Option<(String, String)> = None;
    let mut in_image = false;
    for event in Parser::new_ext(text, options) {
        if let Some((lang, buf)) = code.as_mut() {
            match event {
                Event::Text(t) => buf.push_str(&t),
                Event::End(TagEnd::CodeBlock) => {
                    let html = format!(
                        "<pre class=\"code\"><code>{}</code></pre>\n",
                        highlight(buf, lang)
                    );
                    events.push(Event::Html(CowStr::from(html)));
                    code = None;
                }
                _ => {}
            }
            continue;
        }
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(l) => {
                        l.split_whitespace().next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                code = Some((lang, String::new()));
            }
            Event::Html(h) | Event::InlineHtml(h) => events.push(Event::Text(h)),
            Event::Start(Tag::Image { dest_url, .. }) => {
                in_image = true;
                let link = if safe_url(&dest_url) {
                    format!("<a class=\"image-link\" href=\"{}\">🖼 ", escape(&dest_url))
                } else {
                    "<a class=\"image-link\">🖼 ".to_owned()
                };
                events.push(Event::Html(CowStr::from(link)));
            }
            Event::End(TagEnd::Image) if in_image => {
                in_image = false;
                events.push(Event::Html(CowStr::from("</a>")));
            }
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => {
                let dest_url = if safe_url(&dest_url) {
                    dest_url
                } else {
                    CowStr::from("#")
                };
                events.push(Event::Start(Tag::Link {
                    link_type: if link_type == LinkType::Email {
                        LinkType::Email
                    } else {
                        link_type
                    },
                    dest_url,
                    title,
                    id,
                }));
            }
            other => events.push(other),
        }
    }
    let mut out = String::with_capacity(text.len() * 2);
    pulldown_cmark::html::push_html(&mut out, events.into_iter());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_is_text_and_code_is_highlighted() {
        let html = render(
            "Hi <script>alert(1)</script>\n\n<div onclick=\"x\">block</div>\n\n```rust\nfn main() {}\n```\n[x](javascript:alert(1)) ![img](http://example.com/a.png)",
        );
        assert!(!html.contains("<script>"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(!html.contains("<div onclick"), "{html}");
        assert!(html.contains("<span class=\"k\">fn</span>"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("image-link"), "{html}");
    }
}
