//! What a bench's markdown output starts with: date, commit and device, so that every table
//! in docs/BENCHMARKS.md and the archive (docs/notebook/data/) says where it came from.

use std::time::{SystemTime, UNIX_EPOCH};

/// `"\n## {title}, YYYY-MM-DD HH:MM:SS UTC, commit abc1234[ (+ uncommitted changes)], {device}\n"`
/// (docs/plot_benchmarks.py reads it back).
pub fn header(title: &str, device: &str) -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (commit, dirty) = commit();
    format!(
        "\n## {title}, {} UTC, commit {commit}{}, {device}\n",
        utc(secs),
        if dirty { " (+ uncommitted changes)" } else { "" }
    )
}

/// The short commit hash and whether tracked files differ from it.
fn commit() -> (String, bool) {
    // Run from .gpu/ (built by ../shared/gpu/pack): what the packer recorded, since the GPU host's
    // copy of .git may lag behind the tree it was given. Under cargo: the checkout's.
    let from_pack = std::env::current_exe().is_ok_and(|p| p.components().any(|c| c.as_os_str() == ".gpu"));
    let git = |args: &[&str]| {
        let out = if from_pack { None } else { std::process::Command::new("git").args(args).output().ok() };
        out.filter(|o| o.status.success()).map(|o| o.stdout)
    };
    let packed = |file: &str| std::fs::read_to_string(format!(".gpu/{file}")).ok();
    let commit = git(&["rev-parse", "--short", "HEAD"])
        .map(|o| String::from_utf8_lossy(&o).trim().to_string())
        .or_else(|| packed("commit").map(|c| c.trim().to_string()))
        .unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .map(|o| !o.is_empty())
        .or_else(|| packed("dirty").map(|d| !d.trim().is_empty()))
        .unwrap_or(false);
    (commit, dirty)
}

/// `YYYY-MM-DD HH:MM:SS` from Unix seconds (Howard Hinnant's civil-from-days).
pub fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}
