//! A real small disk for the tests of what a full disk does: a tmpfs of a
//! given size mounted on a temporary directory (root only), resized at
//! will, unmounted when dropped. Included with `#[path]` as `mod tmpfs`,
//! beside `skip.rs` as `mod skip`, by the tests that fill a disk.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use super::skip::{skip, Lack};

/// A tmpfs mounted on a temporary directory; unmounted when dropped.
pub(crate) struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount`'s syntax: `1m`, `256k`); the
    /// error says why it could not (not root, no `mount`).
    pub(crate) fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    /// [`Tmpfs::mount`], or `None` with the skip recorded, saying why
    /// (the caller returns).
    pub(crate) fn mount_or_skip(size: &str) -> Option<Tmpfs> {
        Tmpfs::mount(size)
            .map_err(|why| {
                skip(
                    Lack::Privilege,
                    &format!("cannot mount a small tmpfs here ({why}); run as root"),
                )
            })
            .ok()
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Makes it `size` large, keeping what it holds.
    pub(crate) fn resize(&self, size: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "remounting the tmpfs with size={size} failed");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}
