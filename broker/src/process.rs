//! The broker process's own CPU time, at 10 ms resolution, from `/proc/self/stat` (the
//! standard `process_cpu_seconds_total` of the prometheus crate rounds to whole seconds, too
//! coarse for rates over short windows such as the operator's autoscaling signal).

/// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`, 100 on every Linux ABI).
const TICKS_PER_SECOND: f64 = 100.0;

/// User plus system CPU seconds of this process, or `None` where `/proc` is unavailable.
pub fn cpu_seconds() -> Option<f64> {
    stat_cpu_seconds("/proc/self/stat")
}

/// User plus system CPU seconds of process `pid` (a broker the bench started, for example),
/// or `None` where `/proc` is unavailable or the process is gone.
pub fn cpu_seconds_of(pid: u32) -> Option<f64> {
    stat_cpu_seconds(&format!("/proc/{pid}/stat"))
}

fn stat_cpu_seconds(path: &str) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    let (user, system) = parse_stat(&text)?;
    Some((user + system) as f64 / TICKS_PER_SECOND)
}

/// `utime` and `stime` (fields 14 and 15, in ticks) of a `/proc/<pid>/stat` line. The command
/// name (field 2) may contain spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat(text: &str) -> Option<(u64, u64)> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let user = fields.next()?.parse().ok()?;
    let system = fields.next()?.parse().ok()?;
    Some((user, system))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_user_and_system_ticks() {
        let line = "4242 (starling broker) S 1 4242 4242 0 -1 4194560 1234 0 0 0 731 269 0 0 20 0 9 0 100 1000 200";
        assert_eq!(parse_stat(line), Some((731, 269)));
        // A command name with a closing parenthesis inside.
        let odd = "7 (a) b) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0";
        assert_eq!(parse_stat(odd), Some((5, 6)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1 2"), None);
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(cpu_seconds().is_some_and(|s| s >= 0.0));
            assert!(cpu_seconds_of(std::process::id()).is_some_and(|s| s >= 0.0));
        }
    }
}
