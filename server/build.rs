//! Puts the git commit the binary was built from into `RILL_GIT_COMMIT` (`rill --version`).
//! Without git or outside a checkout (a source tarball) it is "unknown".

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RILL_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves: a checkout rewrites HEAD, a commit rewrites the branch's loose ref
    // (or packed-refs, where the ref is packed) and appends to HEAD's reflog. Only files that
    // exist are named: cargo reruns a build script on every build while a named file is missing
    // (a fresh clone has no packed-refs), and this one relinks `rill` each time.
    let mut watched = vec!["HEAD".to_string(), "logs/HEAD".into(), "packed-refs".into()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}
