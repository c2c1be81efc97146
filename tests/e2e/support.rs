//! Running the proxops binary in tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Output of one proxops run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The repository's top folder.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A component cache shared by the tests of one run, so components compile once.
pub fn shared_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("proxops-cache")
}

/// Run proxops with `args` (after the global `--cache-dir`) in `cwd`.
pub fn proxops_in(cwd: &Path, cache: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(cwd)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .env_remove("PROXOPS_LOG")
        .output()
        .expect("run proxops");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run proxops from the workspace with the shared cache.
pub fn proxops(args: &[&str]) -> Run {
    proxops_in(&workspace(), &shared_cache(), args)
}
