//! The one way proxops reads a file because the repository names it (manifests, cluster
//! files, `proxops.yaml`, policy files, SOPS files, CA files): through a cap-std `Dir` opened
//! once at the repository root, with the path relative to that root.
//!
//! - Absolute paths and `..` are refused before any file system call.
//! - Symlinks are followed only while they stay inside the root: a relative link from one
//!   repository file to another works; a link to an absolute path or above the root is refused
//!   (cap-std resolves every component itself, so no `..`, link or race leads out).
//! - Only regular files are read: the type is checked before opening (a FIFO named `x.yaml`
//!   would block a plain `open` forever), the file is opened non-blocking, and the opened handle
//!   is checked again (the path may have been swapped in between).
//! - A file larger than the caller's limit is refused before it is read.

use std::io::{self, Read as _};
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, FileType, FileTypeExt as _, OpenOptions};

use crate::diag::quote;

/// A repository root, opened once.
#[derive(Debug)]
pub struct RepoDir {
    root: PathBuf,
    dir: Dir,
}

/// What a path inside the repository is, after following in-repository symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    File,
    Folder,
    /// A FIFO, socket or device.
    Other(&'static str),
}

/// A folder's entries: each name with what it is, or why it cannot be used.
pub type Listing = Vec<(String, Result<Entry, ReadError>)>;

/// Why a repository path could not be read. Messages quote the path, never file contents.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("`{0}` is absolute; give the path relative to the repository root")]
    Absolute(String),
    #[error("`{0}` leads outside the repository (`..`); proxops only reads inside the repository")]
    Parent(String),
    #[error("`{0}` does not exist in the repository")]
    NotFound(String),
    #[error(
        "refused: `{0}` leads outside the repository (a symlink to an absolute path or above the repository root); proxops only reads inside the repository"
    )]
    Escapes(String),
    #[error("refused: `{path}` is {what}, not a regular file")]
    NotRegular { path: String, what: &'static str },
    #[error("refused: `{path}` is {size} bytes; the limit for this file is {limit} bytes")]
    TooLarge {
        path: String,
        size: u64,
        limit: usize,
    },
    #[error("cannot read `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// Why the repository itself could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("`{0}` does not exist")]
    Missing(String),
    #[error(
        "`{0}` is a file, not a repository; give the folder that holds clusters/ and the kind folders (vm/, templatevm/, …)"
    )]
    NotAFolder(String),
    #[error("cannot open the repository `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

impl RepoDir {
    /// Open the folder `root` as a repository.
    pub fn open(root: &Path) -> Result<RepoDir, OpenError> {
        let shown = quote(&root.display().to_string());
        match std::fs::metadata(root) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(OpenError::Missing(shown)),
            Ok(m) if !m.is_dir() => return Err(OpenError::NotAFolder(shown)),
            _ => {}
        }
        let dir =
            Dir::open_ambient_dir(root, ambient_authority()).map_err(|source| OpenError::Io {
                path: shown,
                source,
            })?;
        Ok(RepoDir {
            root: root.to_path_buf(),
            dir,
        })
    }

    /// The path the repository was opened at.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What `rel` is; symlinks are followed inside the repository only.
    pub fn entry(&self, rel: &str) -> Result<Entry, ReadError> {
        check_relative(rel)?;
        let meta = self.dir.metadata(rel).map_err(|e| classify(rel, e))?;
        Ok(entry_of(meta.file_type()))
    }

    /// The names in folder `rel` (`""` for the root), sorted, hidden ones (`.x`) left out,
    /// each with what it is or why it cannot be used.
    pub fn list(&self, rel: &str) -> Result<Listing, ReadError> {
        let entries = if rel.is_empty() {
            self.dir.entries()
        } else {
            check_relative(rel)?;
            self.dir.read_dir(rel)
        }
        .map_err(|e| classify(rel, e))?;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| classify(rel, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let full = join(rel, &name);
            // A plain entry is known from the listing; a symlink is followed from the root.
            let kind = match entry.file_type() {
                Ok(t) if !t.is_symlink() => Ok(entry_of(t)),
                _ => self.entry(&full),
            };
            out.push((name, kind));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The bytes of the regular file `rel`, at most `limit` of them.
    pub fn read(&self, rel: &str, limit: usize) -> Result<Vec<u8>, ReadError> {
        check_relative(rel)?;
        let meta = self.dir.metadata(rel).map_err(|e| classify(rel, e))?;
        if let Entry::Folder | Entry::Other(_) = entry_of(meta.file_type()) {
            return Err(not_regular(rel, meta.file_type()));
        }
        if meta.len() > limit as u64 {
            return Err(ReadError::TooLarge {
                path: quote(rel),
                size: meta.len(),
                limit,
            });
        }
        self.read_listed(rel, limit)
    }

    /// [`RepoDir::read`] of a file that [`RepoDir::list`] just gave as [`Entry::File`]: the
    /// listing stands for the type check before opening (a manifest folder holds thousands
    /// of files, and the check cost three system calls each). The open is still non-blocking
    /// and the handle is checked again, type and size, before a byte is read.
    pub fn read_listed(&self, rel: &str, limit: usize) -> Result<Vec<u8>, ReadError> {
        check_relative(rel)?;
        let shown = || quote(rel);
        let mut options = OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt as _;
            options.custom_flags(libc::O_NONBLOCK);
        }
        let file = self
            .dir
            .open_with(rel, &options)
            .map_err(|e| classify(rel, e))?;
        let meta = file.metadata().map_err(|e| classify(rel, e))?;
        if !meta.is_file() {
            return Err(not_regular(rel, meta.file_type()));
        }
        if meta.len() > limit as u64 {
            return Err(ReadError::TooLarge {
                path: shown(),
                size: meta.len(),
                limit,
            });
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(limit as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| classify(rel, e))?;
        if bytes.len() > limit {
            return Err(ReadError::TooLarge {
                path: shown(),
                size: bytes.len() as u64,
                limit,
            });
        }
        Ok(bytes)
    }
}

/// Why a file could not be written into the repository.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Path(#[from] ReadError),
    #[error("`{0}` exists; nothing was written (give --force to replace it)")]
    Exists(String),
    #[error("refused: `{0}` is a symlink; proxops never writes through a symlink")]
    Symlink(String),
    #[error("cannot write `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

impl RepoDir {
    /// Write `bytes` to `rel` atomically: into a temporary file in the same folder, then
    /// renamed over the target, so a reader sees the old file or the new one, never half.
    /// Folders are created as needed (inside the repository only); an existing file is
    /// replaced only with `replace`, and a symlink at `rel` is never written through.
    pub fn write_atomic(&self, rel: &str, bytes: &[u8], replace: bool) -> Result<(), WriteError> {
        use std::io::Write as _;
        check_relative(rel)?;
        let shown = || quote(rel);
        let io = |source: io::Error| WriteError::Io {
            path: shown(),
            source,
        };
        // A replaced file keeps its permissions (a SOPS file may be 0600).
        let keep = match self.dir.symlink_metadata(rel) {
            Ok(m) if m.file_type().is_symlink() => return Err(WriteError::Symlink(shown())),
            Ok(m) if !m.is_file() => return Err(WriteError::Path(not_regular(rel, m.file_type()))),
            Ok(_) if !replace => return Err(WriteError::Exists(shown())),
            Ok(m) => Some(m.permissions()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(WriteError::Path(classify(rel, e))),
        };
        let path = Path::new(rel);
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent {
            self.dir
                .create_dir_all(parent)
                .map_err(|e| WriteError::Path(classify(&parent.display().to_string(), e)))?;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = match parent {
            Some(p) => p.join(format!(".{name}.proxops-{}.tmp", std::process::id())),
            None => PathBuf::from(format!(".{name}.proxops-{}.tmp", std::process::id())),
        };
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        let mut file = self.dir.open_with(&tmp, &options).map_err(io)?;
        let written = file
            .write_all(bytes)
            .and_then(|()| match keep {
                Some(p) => file.set_permissions(p),
                None => Ok(()),
            })
            .and_then(|()| file.sync_all())
            .and_then(|()| self.dir.rename(&tmp, &self.dir, rel));
        if let Err(e) = written {
            let _ = self.dir.remove_file(&tmp);
            return Err(io(e));
        }
        Ok(())
    }
}

fn join(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
    }
}

fn entry_of(t: FileType) -> Entry {
    if t.is_dir() {
        Entry::Folder
    } else if t.is_file() {
        Entry::File
    } else if t.is_fifo() {
        Entry::Other("a FIFO")
    } else if t.is_socket() {
        Entry::Other("a socket")
    } else if t.is_block_device() || t.is_char_device() {
        Entry::Other("a device")
    } else {
        Entry::Other("neither a file nor a folder")
    }
}

fn not_regular(rel: &str, t: FileType) -> ReadError {
    let what = match entry_of(t) {
        Entry::Folder => "a folder",
        Entry::Other(what) => what,
        Entry::File => "a file",
    };
    ReadError::NotRegular {
        path: quote(rel),
        what,
    }
}

fn classify(rel: &str, e: io::Error) -> ReadError {
    let path = quote(rel);
    if e.kind() == io::ErrorKind::NotFound {
        ReadError::NotFound(path)
    } else if e.to_string().contains("outside of the filesystem") {
        ReadError::Escapes(path)
    } else {
        ReadError::Io { path, source: e }
    }
}

/// A path inside the repository: relative, without `..`; checked without touching the disk.
pub fn check_relative(rel: &str) -> Result<(), ReadError> {
    let p = Path::new(rel);
    if rel.is_empty() {
        return Err(ReadError::NotFound(String::new()));
    }
    for c in p.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err(ReadError::Parent(quote(rel))),
            Component::RootDir | Component::Prefix(_) => {
                return Err(ReadError::Absolute(quote(rel)));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_atomic_inside_the_repository_and_never_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let repo = RepoDir::open(dir.path()).unwrap();
        repo.write_atomic("vm/lab/web.yaml", b"a: 1\n", false)
            .unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("vm/lab/web.yaml")).unwrap(),
            b"a: 1\n"
        );
        let again = repo.write_atomic("vm/lab/web.yaml", b"a: 2\n", false);
        assert!(matches!(again, Err(WriteError::Exists(_))), "{again:?}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::Permissions::from_mode(0o600);
            std::fs::set_permissions(dir.path().join("vm/lab/web.yaml"), mode).unwrap();
        }
        repo.write_atomic("vm/lab/web.yaml", b"a: 2\n", true)
            .unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("vm/lab/web.yaml")).unwrap(),
            b"a: 2\n"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let meta = std::fs::metadata(dir.path().join("vm/lab/web.yaml")).unwrap();
            assert_eq!(
                meta.permissions().mode() & 0o777,
                0o600,
                "a replaced file keeps its mode"
            );
        }
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("vm/lab"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            leftovers.len(),
            1,
            "no temporary file is left: {leftovers:?}"
        );
        assert!(matches!(
            repo.write_atomic("../x.yaml", b"", false),
            Err(WriteError::Path(ReadError::Parent(_)))
        ));
        assert!(matches!(
            repo.write_atomic("/tmp/x.yaml", b"", false),
            Err(WriteError::Path(ReadError::Absolute(_)))
        ));
        #[cfg(unix)]
        {
            let outside = tempfile::tempdir().unwrap();
            std::os::unix::fs::symlink(
                outside.path().join("t.yaml"),
                dir.path().join("vm/lab/link.yaml"),
            )
            .unwrap();
            let through = repo.write_atomic("vm/lab/link.yaml", b"x", true);
            assert!(
                matches!(through, Err(WriteError::Symlink(_))),
                "{through:?}"
            );
            assert!(!outside.path().join("t.yaml").exists());
            std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
            assert!(repo.write_atomic("out/x.yaml", b"x", true).is_err());
            assert!(!outside.path().join("x.yaml").exists());
        }
    }

    /// A repository with `web.yaml`, `shared/base.yaml`, a folder, in-repo and escaping
    /// symlinks and a FIFO, plus a file outside it.
    struct Fixture {
        _outside: tempfile::TempDir,
        repo: tempfile::TempDir,
    }

    fn fixture() -> Fixture {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("passwd"), "root:x:0:0\n").unwrap();
        let repo = tempfile::tempdir().unwrap();
        let r = repo.path();
        std::fs::write(r.join("web.yaml"), "a: 1\n").unwrap();
        std::fs::create_dir_all(r.join("shared")).unwrap();
        std::fs::create_dir_all(r.join("vm/lab")).unwrap();
        std::fs::write(r.join("shared/base.yaml"), "b: 2\n").unwrap();
        std::fs::write(r.join("big.yaml"), "x".repeat(100)).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::symlink;
            symlink("../../shared/base.yaml", r.join("vm/lab/linked.yaml")).unwrap();
            symlink("shared", r.join("linked-folder")).unwrap();
            symlink(outside.path().join("passwd"), r.join("abs.yaml")).unwrap();
            symlink(
                "../../../../../../../../../../etc/passwd",
                r.join("up.yaml"),
            )
            .unwrap();
            symlink(r.join("web.yaml"), r.join("abs-inside.yaml")).unwrap();
            symlink("loop.yaml", r.join("loop.yaml")).unwrap();
            let made = std::process::Command::new("mkfifo")
                .arg(r.join("fifo.yaml"))
                .status()
                .expect("run mkfifo");
            assert!(made.success(), "mkfifo");
        }
        Fixture {
            _outside: outside,
            repo,
        }
    }

    fn check(dir: &RepoDir, rel: &str, expected: Result<&str, &str>) {
        let got = dir
            .read(rel, 64)
            .map(|b| String::from_utf8(b).unwrap())
            .map_err(|e| e.to_string());
        match (&got, expected) {
            (Ok(text), Ok(want)) => assert_eq!(text, want, "{rel}"),
            (Err(e), Err(want)) => assert!(e.contains(want), "{rel}: {e}"),
            _ => panic!("{rel}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn reads_inside_and_refuses_everything_else() {
        let f = fixture();
        let dir = RepoDir::open(f.repo.path()).unwrap();
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("web.yaml", Ok("a: 1\n")),
            ("./shared/base.yaml", Ok("b: 2\n")),
            (
                "missing.yaml",
                Err("`missing.yaml` does not exist in the repository"),
            ),
            ("../web.yaml", Err("leads outside the repository (`..`)")),
            (
                "shared/../web.yaml",
                Err("leads outside the repository (`..`)"),
            ),
            (
                "../../etc/passwd",
                Err("leads outside the repository (`..`)"),
            ),
            ("/etc/passwd", Err("`/etc/passwd` is absolute")),
            (
                "shared",
                Err("refused: `shared` is a folder, not a regular file"),
            ),
            (
                "big.yaml",
                Err("refused: `big.yaml` is 100 bytes; the limit for this file is 64 bytes"),
            ),
            #[cfg(unix)]
            ("vm/lab/linked.yaml", Ok("b: 2\n")),
            #[cfg(unix)]
            ("linked-folder/base.yaml", Ok("b: 2\n")),
            #[cfg(unix)]
            (
                "abs.yaml",
                Err("refused: `abs.yaml` leads outside the repository"),
            ),
            #[cfg(unix)]
            (
                "abs-inside.yaml",
                Err("refused: `abs-inside.yaml` leads outside the repository"),
            ),
            #[cfg(unix)]
            (
                "up.yaml",
                Err("refused: `up.yaml` leads outside the repository"),
            ),
            #[cfg(unix)]
            (
                "fifo.yaml",
                Err("refused: `fifo.yaml` is a FIFO, not a regular file"),
            ),
            #[cfg(unix)]
            ("loop.yaml", Err("cannot read `loop.yaml`")),
        ];
        for (rel, want) in cases {
            check(&dir, rel, *want);
        }
    }

    #[test]
    fn lists_with_symlinks_resolved_inside() {
        let f = fixture();
        let dir = RepoDir::open(f.repo.path()).unwrap();
        let listed: Vec<(String, String)> = dir
            .list("")
            .unwrap()
            .into_iter()
            .map(|(n, e)| (n, format!("{:?}", e.map_err(|e| e.to_string()))))
            .collect();
        let get = |n: &str| listed.iter().find(|(m, _)| m == n).map(|(_, e)| e.clone());
        assert_eq!(get("web.yaml").unwrap(), "Ok(File)");
        assert_eq!(get("shared").unwrap(), "Ok(Folder)");
        #[cfg(unix)]
        {
            assert_eq!(get("linked-folder").unwrap(), "Ok(Folder)");
            assert_eq!(get("fifo.yaml").unwrap(), "Ok(Other(\"a FIFO\"))");
            assert!(get("abs.yaml").unwrap().contains("leads outside"));
        }
    }

    #[test]
    fn the_root_must_be_a_folder() {
        let f = fixture();
        let file = f.repo.path().join("web.yaml");
        let e = RepoDir::open(&file).unwrap_err().to_string();
        assert!(e.ends_with("web.yaml` is a file, not a repository; give the folder that holds clusters/ and the kind folders (vm/, templatevm/, …)"), "{e}");
        let e = RepoDir::open(&f.repo.path().join("nope"))
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("nope` does not exist"), "{e}");
    }
}
