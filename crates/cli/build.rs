//! Link options of the `keel` binary.
//!
//! A release build for x86_64 Linux with glibc (linked by the toolchain's
//! lld) packs its relative relocations (`DT_RELR`): the table the dynamic
//! loader reads at every start shrinks from about 0.9 MB to a few KB, and
//! the resident size of a short process with it. Only glibc 2.36 and newer
//! load such a binary, so this is done only when the C library of the
//! building machine is one of those (it provides `GLIBC_ABI_DT_RELR`), and
//! `KEEL_NO_PACKED_RELOCS=1` turns it off (a binary for an older system).
//!
//! The same release build links the functions a turn runs first and next
//! to each other, in the order of `hot-symbols.txt` (lld's
//! `--symbol-ordering-file`; written by `scripts/hot-symbols.py`). The
//! kernel maps the binary 64 KiB at a time around each page a process
//! touches, so the code of a turn spread over the whole `.text` made half
//! of it resident; packed, it is a few MiB. A name the list has and the
//! build does not (after a change of dependencies or code) is skipped, so
//! a stale list only costs memory; `KEEL_NO_SYMBOL_ORDER=1` links without it.
//!
//! Nothing here applies to debug builds, tests, libraries or other targets.

/// Where x86_64 distributions keep the C library.
const LIBC_PATHS: &[&str] = &[
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/lib64/libc.so.6",
    "/usr/lib64/libc.so.6",
    "/usr/lib/libc.so.6",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KEEL_NO_PACKED_RELOCS");
    println!("cargo:rerun-if-env-changed=KEEL_NO_SYMBOL_ORDER");
    println!("cargo:rerun-if-changed={HOT_SYMBOLS}");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let opted_out = std::env::var_os("KEEL_NO_PACKED_RELOCS").is_some_and(|v| v != "0");
    if target == "x86_64-unknown-linux-gnu"
        && host == target
        && release
        && !opted_out
        && libc_loads_packed_relocs()
    {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let unordered = std::env::var_os("KEEL_NO_SYMBOL_ORDER").is_some_and(|v| v != "0");
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let list = std::path::Path::new(&manifest_dir).join(HOT_SYMBOLS);
    if target == "x86_64-unknown-linux-gnu" && release && !unordered && list.is_file() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// The list of hot functions, beside this file.
const HOT_SYMBOLS: &str = "hot-symbols.txt";

/// Whether the first C library found defines the `GLIBC_ABI_DT_RELR`
/// version (glibc 2.36+).
fn libc_loads_packed_relocs() -> bool {
    let needle = b"GLIBC_ABI_DT_RELR";
    LIBC_PATHS
        .iter()
        .find_map(|p| std::fs::read(p).ok())
        .is_some_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}
