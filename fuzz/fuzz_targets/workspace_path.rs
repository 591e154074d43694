//! Workspace paths as a guest sends them, resolved under a root that holds a symlink to a
//! directory outside it: whatever the path, nothing outside the root is ever read.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

/// `<tmp>/root/inside.txt`, `<tmp>/root/out -> <tmp>/outside`, `<tmp>/outside/secret.txt`.
fn root() -> &'static PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("vak-fuzz-ws-{}", std::process::id()));
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("inside.txt"), b"inside").unwrap();
        std::fs::write(outside.join("secret.txt"), b"SECRET").unwrap();
        let _ = std::os::unix::fs::symlink(&outside, root.join("out"));
        let _ = std::os::unix::fs::symlink("../../outside/secret.txt", root.join("sub/up"));
        let _ = std::os::unix::fs::symlink("/etc/passwd", root.join("abs"));
        root
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(bytes) = vak_host::fuzzing::workspace_read(root(), path) {
        assert_ne!(bytes, b"SECRET", "{path:?} read a file outside the root");
        assert!(!bytes.starts_with(b"root:"), "{path:?} read /etc/passwd");
    }
});
