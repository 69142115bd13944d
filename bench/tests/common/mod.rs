//! What the bench's end-to-end tests share.

use std::path::PathBuf;

/// `target/<profile>/strand-server`, found from the test executable's path
/// (`target/<profile>/deps/<test>-…`). The tests never build it.
pub fn server_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test executable sits in target/<profile>/deps");
    let server = profile_dir.join("strand-server");
    assert!(
        server.is_file(),
        "{} is missing: build it first with `cargo build -p strand-server` \
         (`cargo test --workspace` builds it too); this test does not build it",
        server.display()
    );
    server
}
