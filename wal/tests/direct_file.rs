//! Direct appends against a real file opened `O_DIRECT`: the kernel accepts
//! every planned write (it refuses misaligned ones), the file holds the frames
//! appended, and the zeros past the last frame scan as a torn tail.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use strand_prng::Prng;
use strand_wal::direct::{AlignedBuffer, BufferPool, DirectFile, Plan};
use strand_wal::{Tail, encode_frame_into, scan};

/// Opens `path` for direct writes; `None` where the file system refuses
/// `O_DIRECT` (tmpfs), so the test says so and checks nothing there.
fn open_direct(path: &Path) -> Option<File> {
    match OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(file) => Some(file),
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => None,
        Err(error) => panic!("open {}: {error}", path.display()),
    }
}

/// Appends `parts` through `direct`, reading the tail block (buffered, from
/// `reader`) when the plan asks for it.
fn append(
    direct: &mut DirectFile,
    file: &File,
    reader: &File,
    pool: &mut BufferPool,
    parts: &[&[u8]],
) {
    let mut buffer: AlignedBuffer = pool.take();
    let write = loop {
        match direct.plan(direct.end(), parts.iter().copied(), &mut buffer) {
            Plan::Ready(write) => break write,
            Plan::ReadTail { offset } => {
                let mut block = vec![0; strand_wal::direct::DIRECT_BLOCK_BYTES];
                let read = read_at_most(reader, &mut block, offset);
                direct
                    .set_tail(offset, &block[..read])
                    .expect("the file holds its tail");
            }
        }
    };
    file.write_all_at(buffer.as_bytes(), write.offset)
        .expect("the kernel takes a planned direct write");
    pool.put(buffer);
}

fn read_at_most(file: &File, buffer: &mut [u8], offset: u64) -> usize {
    let mut done = 0;
    while done < buffer.len() {
        match file.read_at(&mut buffer[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(read) => done += read,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => panic!("read: {error}"),
        }
    }
    done
}

#[test]
fn direct_appends_hold_the_frames_and_end_in_a_torn_tail() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let path = dir.path().join("segment.log");
    let Some(file) = open_direct(&path) else {
        eprintln!(
            "O_DIRECT is not supported under {}: nothing checked",
            dir.path().display()
        );
        return;
    };
    let reader = File::open(&path).expect("a buffered reader");
    let mut rng = Prng::new(7);
    let mut pool = BufferPool::default();
    let mut direct = DirectFile::new(0);
    let mut expected = Vec::new();
    for round in 0..60u32 {
        if round % 20 == 19 {
            // A cut back to a frame boundary, as a view change truncates.
            let frames = scan(&expected).frames;
            let keep = frames[frames.len() / 2].offset;
            file.set_len(keep).expect("cut");
            direct.cut(keep);
            expected.truncate(keep as usize);
        }
        if round % 15 == 14 {
            direct = DirectFile::new(direct.end()); // reopened: the tail is read
        }
        let frames: Vec<Vec<u8>> = (0..1 + rng.next_u64() % 3)
            .map(|_| {
                let payload = vec![(round as u8) | 1; (rng.next_u64() % 20_000) as usize];
                let mut frame = Vec::new();
                encode_frame_into(&payload, &mut frame).expect("a frame");
                frame
            })
            .collect();
        let parts: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        append(&mut direct, &file, &reader, &mut pool, &parts);
        frames
            .iter()
            .for_each(|frame| expected.extend_from_slice(frame));
    }
    let on_disk = std::fs::read(&path).expect("read back");
    assert_eq!(
        &on_disk[..expected.len()],
        &expected[..],
        "the frames, in order"
    );
    assert_eq!(
        on_disk.len() % strand_wal::direct::DIRECT_BLOCK_BYTES,
        0,
        "whole blocks"
    );
    let report = scan(&on_disk);
    assert_eq!(report.valid_len, expected.len() as u64);
    match report.tail {
        Tail::Torn { torn_bytes } => {
            assert_eq!(torn_bytes, (on_disk.len() - expected.len()) as u64)
        }
        Tail::Clean => assert_eq!(on_disk.len(), expected.len()),
        other => panic!("zeros past the frames scan as a torn tail, not {other:?}"),
    }
}
