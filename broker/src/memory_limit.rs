//! The memory limit of the broker's own cgroup, for the memory-fit check at start
//! (`starling_config::memory::check_fit`): cgroup v2's `memory.max` or cgroup v1's
//! `memory.limit_in_bytes`, looked up at the process's cgroup path first and at the cgroup root
//! second (inside a container the process's own cgroup is mounted at the root). No limit, or
//! one too large to be real, is `None`.

use std::path::{Path, PathBuf};

/// A limit above this (2^60 bytes) is treated as "no limit": cgroup v1 reports an unlimited
/// group as a number close to `i64::MAX`.
const UNLIMITED_ABOVE: u64 = 1 << 60;

/// The memory limit of this process's cgroup, if it has one.
pub fn cgroup_memory_limit() -> Option<u64> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    candidates(&membership, Path::new("/sys/fs/cgroup"))
        .into_iter()
        .find_map(|file| std::fs::read_to_string(file).ok())
        .and_then(|text| parse_limit(&text))
}

/// The files that may hold the limit, most specific first, for a `/proc/self/cgroup` text.
pub fn candidates(membership: &str, root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let rel = path.trim_start_matches('/');
        if controllers.is_empty() {
            files.push(root.join(rel).join("memory.max"));
        } else if controllers.split(',').any(|c| c == "memory") {
            files.push(root.join("memory").join(rel).join("memory.limit_in_bytes"));
        }
    }
    files.push(root.join("memory.max"));
    files.push(root.join("memory").join("memory.limit_in_bytes"));
    files
}

/// A limit file's value: bytes, or `None` for `max` and for values that mean "no limit".
pub fn parse_limit(text: &str) -> Option<u64> {
    let value: u64 = text.trim().parse().ok()?;
    (value < UNLIMITED_ABOVE).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_and_unlimited_is_none() {
        assert_eq!(parse_limit("4294967296\n"), Some(4 << 30));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712"), None);
        assert_eq!(parse_limit(""), None);
    }

    #[test]
    fn v2_and_v1_paths_come_before_the_root() {
        let root = Path::new("/sys/fs/cgroup");
        let v2 = candidates("0::/kubepods/pod1/c1\n", root);
        assert_eq!(v2[0], root.join("kubepods/pod1/c1/memory.max"));
        assert_eq!(v2[1], root.join("memory.max"));
        let v1 = candidates("5:cpu,cpuacct:/x\n4:memory:/kubepods/pod1\n", root);
        assert_eq!(
            v1[0],
            root.join("memory/kubepods/pod1/memory.limit_in_bytes")
        );
        assert_eq!(v1.last(), Some(&root.join("memory/memory.limit_in_bytes")));
    }
}
