//! Real write failures on real files, through both backends: the file size
//! limit (RLIMIT_FSIZE, with SIGXFSZ ignored) makes the kernel cut a write short
//! and then fail it with EFBIG. This exercises the io_uring short-write path and
//! the typed error and poisoning that follow, on one file only.
//!
//! The limit is per process, so this binary holds this one test alone.
#![allow(unsafe_code)]

mod common;

use bytes::Bytes;
use common::{Backend, Collector, start};
use strand_wal::{CompletionKind, IoOp, OpenMode, WalError};

const LIMIT_BYTES: u64 = 256 * 1024;

#[test]
fn a_write_past_the_file_size_limit_fails_typed_and_poisons_only_that_file() {
    // SAFETY: ignoring SIGXFSZ and lowering our own soft limit touch no memory;
    // this test binary runs nothing else that could be affected.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit {
            rlim_cur: LIMIT_BYTES,
            rlim_max: libc::RLIM_INFINITY,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    for backend in [Backend::Uring, Backend::Std] {
        check(backend);
    }
}

fn check(backend: Backend) {
    let Some(wal) = start(backend) else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let (big, small) = (Collector::new(), Collector::new());
    let big_file = wal
        .open(
            dir.path().join("big.log"),
            OpenMode::CreateNew,
            big.sink.clone(),
        )
        .expect("big")
        .file;
    let small_file = wal
        .open(
            dir.path().join("small.log"),
            OpenMode::CreateNew,
            small.sink.clone(),
        )
        .expect("small")
        .file;
    let chunk = Bytes::from(vec![7u8; 100 * 1024]);
    for user_data in 0..2 {
        wal.append(big_file, chunk.clone(), user_data)
            .expect("queued");
        assert!(big.recv().result.is_ok(), "{backend:?}: below the limit");
    }
    // Starts below the limit and crosses it: short, then EFBIG.
    wal.append(big_file, chunk.clone(), 2).expect("queued");
    let failed = big.recv();
    assert_eq!(failed.kind, CompletionKind::Durable);
    assert_eq!(
        failed.result,
        Err(WalError::Io {
            file: big_file,
            op: IoOp::Write,
            errno: libc::EFBIG
        }),
        "{backend:?}"
    );
    wal.append(big_file, Bytes::from_static(b"after"), 3)
        .expect("queued");
    assert!(
        matches!(big.recv().result, Err(WalError::Poisoned { .. })),
        "{backend:?}"
    );
    wal.append(small_file, Bytes::from_static(b"unaffected"), 4)
        .expect("queued");
    assert!(
        small.recv().result.is_ok(),
        "{backend:?}: other files keep working"
    );

    // Small fsyncs earn zero-filled room, whose 1 MiB crosses the limit: the
    // fill fails, the appends go on without it, and the close cuts whatever
    // part of it was written.
    let path = dir.path().join("filled.log");
    let filled = Collector::new();
    let file = wal
        .open(&path, OpenMode::CreateNew, filled.sink.clone())
        .expect("filled")
        .file;
    let mut end = 0;
    for user_data in 0..8 {
        wal.append(file, Bytes::from(vec![9u8; 1000]), user_data)
            .expect("queued");
        let range = filled.recv().result.expect("the appends never notice");
        end = range.end();
    }
    wal.close(file, 8).expect("queued");
    assert_eq!(filled.recv().kind, CompletionKind::Closed);
    let bytes = std::fs::read(&path).expect("readable");
    assert_eq!(
        bytes.len() as u64,
        end,
        "{backend:?}: no zeros left past the frames"
    );
    assert_eq!(strand_wal::scan(&bytes).frames.len(), 8);
    wal.shutdown().expect("the small file syncs");
}
