//! [`ReadHandles`]: the read descriptors of every [`super::FileDisk`] of a
//! node, under one bound.
//!
//! A fetch or a repair reads a segment through a descriptor kept open for the
//! next read. A node with thousands of partitions cannot keep one per segment
//! read: the handles of all its partitions share this cache, which closes the
//! least recently used past its capacity. A reader holds its handle (an
//! `Arc`) only for the length of one `pread`, outside the lock.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// A bounded, shared cache of read-only descriptors by path. Cheap to clone;
/// clones share the cache.
#[derive(Clone)]
pub struct ReadHandles {
    cache: Arc<Mutex<Cache>>,
}

struct Cache {
    capacity: usize,
    by_path: BTreeMap<PathBuf, (Arc<File>, u64)>,
    by_use: BTreeMap<u64, PathBuf>,
    uses: u64,
}

impl ReadHandles {
    /// A cache that keeps at most `capacity` descriptors open.
    pub fn new(capacity: usize) -> ReadHandles {
        assert!(capacity > 0, "a read needs one descriptor");
        let cache = Cache {
            capacity,
            by_path: BTreeMap::new(),
            by_use: BTreeMap::new(),
            uses: 0,
        };
        ReadHandles {
            cache: Arc::new(Mutex::new(cache)),
        }
    }

    /// The handle of `path`, opened if it is not cached.
    pub fn get(&self, path: &Path) -> io::Result<Arc<File>> {
        if let Some(handle) = self.lock().touch(path) {
            return Ok(handle);
        }
        let handle = Arc::new(File::open(path)?);
        Ok(self.lock().insert(path, handle))
    }

    /// Closes the cached handles of `path` and of every path under it (a file
    /// or directory removed or renamed: its old handles read the old file).
    pub fn forget_under(&self, path: &Path) {
        let mut cache = self.lock();
        let gone: Vec<PathBuf> = cache
            .by_path
            .range(path.to_path_buf()..)
            .take_while(|(open, _)| open.starts_with(path))
            .map(|(open, _)| open.clone())
            .collect();
        for open in gone {
            cache.remove(&open);
        }
    }

    /// Descriptors held now.
    pub fn len(&self) -> usize {
        self.lock().by_path.len()
    }

    /// True when no descriptor is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Cache> {
        // A panic while holding the lock leaves the maps consistent (every
        // step below is a complete insert or remove): keep using them.
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Cache {
    fn touch(&mut self, path: &Path) -> Option<Arc<File>> {
        let (handle, last_use) = self.by_path.get_mut(path)?;
        let handle = Arc::clone(handle);
        let previous = std::mem::replace(last_use, self.uses);
        self.by_use.remove(&previous);
        self.by_use.insert(self.uses, path.to_path_buf());
        self.uses += 1;
        Some(handle)
    }

    /// Caches `handle` (or, if another reader cached one meanwhile, keeps
    /// that one) and closes the least recently used past the capacity.
    fn insert(&mut self, path: &Path, handle: Arc<File>) -> Arc<File> {
        if let Some(cached) = self.touch(path) {
            return cached;
        }
        while self.by_path.len() >= self.capacity {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.by_path.remove(&oldest);
        }
        self.by_path
            .insert(path.to_path_buf(), (Arc::clone(&handle), self.uses));
        self.by_use.insert(self.uses, path.to_path_buf());
        self.uses += 1;
        self.assert_invariants();
        handle
    }

    fn remove(&mut self, path: &Path) {
        if let Some((_, last_use)) = self.by_path.remove(path) {
            self.by_use.remove(&last_use);
        }
    }

    fn assert_invariants(&self) {
        assert_eq!(self.by_path.len(), self.by_use.len());
        assert!(self.by_path.len() <= self.capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_handle_closes_past_the_capacity() {
        let dir = tempfile::tempdir().expect("temp dir");
        let paths: Vec<PathBuf> = (0..3)
            .map(|index| {
                let path = dir.path().join(format!("s{index}"));
                std::fs::write(&path, [index as u8]).expect("write");
                path
            })
            .collect();
        let handles = ReadHandles::new(2);
        handles.get(&paths[0]).expect("open");
        handles.get(&paths[1]).expect("open");
        handles.get(&paths[0]).expect("cached");
        handles.get(&paths[2]).expect("open");
        assert_eq!(handles.len(), 2);
        let cache = handles.lock();
        assert!(cache.by_path.contains_key(&paths[0]), "used last but one");
        assert!(
            !cache.by_path.contains_key(&paths[1]),
            "least recently used"
        );
    }

    #[test]
    fn forgetting_a_directory_closes_every_handle_under_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (inner, other) = (dir.path().join("p1"), dir.path().join("p10"));
        std::fs::create_dir(&inner).expect("dir");
        std::fs::create_dir(&other).expect("dir");
        for path in [inner.join("a"), inner.join("b"), other.join("a")] {
            std::fs::write(&path, b"x").expect("write");
        }
        let handles = ReadHandles::new(8);
        for path in [inner.join("a"), inner.join("b"), other.join("a")] {
            handles.get(&path).expect("open");
        }
        handles.forget_under(&inner);
        assert_eq!(handles.len(), 1, "only p10/a stays: p10 is not under p1");
    }
}
