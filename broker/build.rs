//! Stamps the git revision the broker is built from into `STARLING_GIT_REVISION` (read by
//! `starling_build_info{revision}`): the variable of the same name when the build sets it
//! (a Docker build has no `.git`), else `git rev-parse --short=12 HEAD` with `-dirty` for
//! uncommitted changes, else `unknown`.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=STARLING_GIT_REVISION");
    let revision = match std::env::var("STARLING_GIT_REVISION") {
        Ok(r) if !r.trim().is_empty() => r.trim().to_string(),
        _ => {
            // Rebuild when HEAD moves: a checkout changes HEAD, a commit the branch's ref (in
            // the common directory for a linked worktree, or in packed-refs). `-dirty` is as of
            // the last build.
            let dirs: Vec<String> = ["--git-dir", "--git-common-dir"]
                .iter()
                .filter_map(|flag| git(&["rev-parse", flag]))
                .collect();
            let head_ref = git(&["symbolic-ref", "-q", "HEAD"]);
            for dir in &dirs {
                let mut files = vec!["HEAD".to_string(), "packed-refs".to_string()];
                files.extend(head_ref.clone());
                for f in files {
                    let p = Path::new(dir).join(f);
                    if p.exists() {
                        println!("cargo:rerun-if-changed={}", p.display());
                    }
                }
            }
            match git(&["rev-parse", "--short=12", "HEAD"]) {
                Some(rev) if !rev.is_empty() => {
                    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                        .is_some_and(|s| !s.is_empty());
                    if dirty { format!("{rev}-dirty") } else { rev }
                }
                _ => "unknown".to_string(),
            }
        }
    };
    println!("cargo:rustc-env=STARLING_GIT_REVISION={revision}");
}
