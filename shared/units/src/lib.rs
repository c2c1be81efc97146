//! Sizes, shared by the kind and policy SDKs: human sizes written in manifests (`8GiB`,
//! `512MiB`, `1.5TiB`) and the sizes PVE prints (`32G`, `2252M`, `4M`, `512K`, plain bytes), all
//! as exact byte counts. No dependencies, so it builds for wasm32-wasip2 and natively alike.
//!
//! Manifest sizes must carry a binary unit (`B`, `KiB`, `MiB`, `GiB`, `TiB`): a bare number is
//! ambiguous (PVE reads `memory` as MiB but `size=` as bytes and `STORAGE:N` as GiB), and a
//! decimal unit (`GB`) is a different number than most people mean, so both are rejected with a
//! message that says what to write instead.

use std::fmt;

/// One KiB in bytes.
pub const KIB: u64 = 1 << 10;
/// One MiB in bytes.
pub const MIB: u64 = 1 << 20;
/// One GiB in bytes.
pub const GIB: u64 = 1 << 30;
/// One TiB in bytes.
pub const TIB: u64 = 1 << 40;

/// Why a size could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeError {
    /// Nothing was written.
    Empty,
    /// A number with no unit, e.g. `2048`.
    NoUnit(String),
    /// The number part is not a number, e.g. `eightGiB`.
    BadNumber(String),
    /// The unit is not one of the accepted ones.
    UnknownUnit(String),
    /// A decimal (SI) unit such as `GB`, which is 10^9 and not 2^30.
    DecimalUnit(String),
    /// The value is not a whole number of bytes (e.g. `0.3B`).
    NotWhole(String),
    /// The value does not fit in 64 bits.
    TooLarge(String),
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeError::Empty => write!(
                f,
                "size is empty; expected a number with a unit such as 8GiB"
            ),
            SizeError::NoUnit(s) => write!(
                f,
                "size `{s}` has no unit; write it with a binary unit such as `{s}MiB` or `{s}GiB`"
            ),
            SizeError::BadNumber(s) => {
                write!(
                    f,
                    "size `{s}` does not start with a number; expected e.g. 512MiB or 8GiB"
                )
            }
            SizeError::UnknownUnit(u) => {
                write!(
                    f,
                    "unknown size unit `{u}`; expected one of B, KiB, MiB, GiB, TiB"
                )
            }
            SizeError::DecimalUnit(u) => {
                let bin = format!("{}i{}", &u[..1], &u[1..]);
                write!(
                    f,
                    "decimal unit `{u}` is not accepted; use the binary unit `{bin}`"
                )
            }
            SizeError::NotWhole(s) => write!(f, "size `{s}` is not a whole number of bytes"),
            SizeError::TooLarge(s) => write!(f, "size `{s}` is too large"),
        }
    }
}

/// Split `12.5GiB` into the number part and the unit part.
fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    (&s[..end], s[end..].trim_start())
}

/// Multiply a decimal number given as text by `unit`, exactly.
fn scale(number: &str, unit: u64, original: &str) -> Result<u64, SizeError> {
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(SizeError::BadNumber(original.to_string()));
    }
    if number.ends_with('.') {
        return Err(SizeError::BadNumber(original.to_string()));
    }
    let too_large = || SizeError::TooLarge(original.to_string());
    let int: u128 = int.parse().map_err(|_| too_large())?;
    let mut total = int.checked_mul(unit as u128).ok_or_else(too_large)?;
    if !frac.is_empty() {
        if frac.len() > 18 {
            return Err(SizeError::NotWhole(original.to_string()));
        }
        let den = 10u128.pow(frac.len() as u32);
        let num: u128 = frac.parse().map_err(|_| too_large())?;
        let scaled = num * unit as u128;
        if !scaled.is_multiple_of(den) {
            return Err(SizeError::NotWhole(original.to_string()));
        }
        total += scaled / den;
    }
    u64::try_from(total).map_err(|_| too_large())
}

/// Parse a manifest size such as `8GiB`, `512MiB`, `1.5TiB` or `4096B` into bytes.
pub fn parse_human(s: &str) -> Result<u64, SizeError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(SizeError::Empty);
    }
    let (number, unit) = split_number(s);
    if number.is_empty() {
        return Err(SizeError::BadNumber(s.to_string()));
    }
    let factor = match unit {
        "" => return Err(SizeError::NoUnit(number.to_string())),
        "B" => 1,
        "KiB" => KIB,
        "MiB" => MIB,
        "GiB" => GIB,
        "TiB" => TIB,
        "KB" | "kB" | "MB" | "GB" | "TB" => {
            return Err(SizeError::DecimalUnit(unit.to_uppercase()));
        }
        other => return Err(SizeError::UnknownUnit(other.to_string())),
    };
    scale(number, factor, s)
}

/// Parse a size as PVE prints or accepts it: `32G`, `2252M`, `4M`, `1T`, `512K`, plain bytes
/// (`1048576`), and the `KiB`-style spellings `parse_size` also takes.
pub fn parse_pve(s: &str) -> Result<u64, SizeError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(SizeError::Empty);
    }
    let (number, unit) = split_number(s);
    if number.is_empty() {
        return Err(SizeError::BadNumber(s.to_string()));
    }
    let factor = match unit {
        "" | "B" => 1,
        "K" | "KiB" => KIB,
        "M" | "MiB" => MIB,
        "G" | "GiB" => GIB,
        "T" | "TiB" => TIB,
        other => return Err(SizeError::UnknownUnit(other.to_string())),
    };
    scale(number, factor, s)
}

/// Print bytes the way PVE's `format_size` does: the largest of `T`, `G`, `M`, `K` that divides
/// exactly, or plain bytes.
pub fn format_pve(bytes: u64) -> String {
    for (unit, suffix) in [(TIB, "T"), (GIB, "G"), (MIB, "M"), (KIB, "K")] {
        if bytes != 0 && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// Print bytes as a manifest size: the largest binary unit that divides exactly.
pub fn format_human(bytes: u64) -> String {
    for (unit, suffix) in [(TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")] {
        if bytes != 0 && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    format!("{bytes}B")
}

/// Bytes as a whole number of MiB, or `None` when not a multiple of 1 MiB.
pub fn exact_mib(bytes: u64) -> Option<u64> {
    bytes.is_multiple_of(MIB).then_some(bytes / MIB)
}

/// Bytes as a whole number of GiB, or `None` when not a multiple of 1 GiB.
pub fn exact_gib(bytes: u64) -> Option<u64> {
    bytes.is_multiple_of(GIB).then_some(bytes / GIB)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: Result<u64, &str>) {
        let got = parse_human(input).map_err(|e| e.to_string());
        assert_eq!(
            got,
            expected.map_err(str::to_string),
            "parse_human({input:?})"
        );
    }

    fn check_pve(input: &str, expected: Result<u64, &str>) {
        let got = parse_pve(input).map_err(|e| e.to_string());
        assert_eq!(
            got,
            expected.map_err(str::to_string),
            "parse_pve({input:?})"
        );
    }

    #[test]
    fn human_sizes() {
        check("8GiB", Ok(8 * GIB));
        check("512MiB", Ok(512 * MIB));
        check("50GiB", Ok(50 * GIB));
        check("1TiB", Ok(TIB));
        check("1.5GiB", Ok(1536 * MIB));
        check(" 2GiB ", Ok(2 * GIB));
        check("4096B", Ok(4096));
        check("4KiB", Ok(4096));
        check("0GiB", Ok(0));
        check(
            "",
            Err("size is empty; expected a number with a unit such as 8GiB"),
        );
        check(
            "2048",
            Err(
                "size `2048` has no unit; write it with a binary unit such as `2048MiB` or `2048GiB`",
            ),
        );
        check(
            "8GB",
            Err("decimal unit `GB` is not accepted; use the binary unit `GiB`"),
        );
        check(
            "8G",
            Err("unknown size unit `G`; expected one of B, KiB, MiB, GiB, TiB"),
        );
        check(
            "8gib",
            Err("unknown size unit `gib`; expected one of B, KiB, MiB, GiB, TiB"),
        );
        check(
            "GiB",
            Err("size `GiB` does not start with a number; expected e.g. 512MiB or 8GiB"),
        );
        check(
            "1.GiB",
            Err("size `1.GiB` does not start with a number; expected e.g. 512MiB or 8GiB"),
        );
        check("0.3B", Err("size `0.3B` is not a whole number of bytes"));
        check("99999999999TiB", Err("size `99999999999TiB` is too large"));
    }

    #[test]
    fn pve_sizes() {
        check_pve("32G", Ok(32 * GIB));
        check_pve("2252M", Ok(2252 * MIB));
        check_pve("4M", Ok(4 * MIB));
        check_pve("1T", Ok(TIB));
        check_pve("512K", Ok(512 * KIB));
        check_pve("528K", Ok(528 * KIB));
        check_pve("1048576", Ok(MIB));
        check_pve("0.5G", Ok(512 * MIB));
        check_pve("10GiB", Ok(10 * GIB));
        check_pve(
            "",
            Err("size is empty; expected a number with a unit such as 8GiB"),
        );
        check_pve(
            "12X",
            Err("unknown size unit `X`; expected one of B, KiB, MiB, GiB, TiB"),
        );
    }

    #[test]
    fn formatting() {
        for (bytes, pve, human) in [
            (32 * GIB, "32G", "32GiB"),
            (TIB, "1T", "1TiB"),
            (2252 * MIB, "2252M", "2252MiB"),
            (2361393152, "2252M", "2252MiB"),
            (528 * KIB, "528K", "528KiB"),
            (1000, "1000", "1000B"),
            (0, "0", "0B"),
        ] {
            assert_eq!(format_pve(bytes), pve);
            assert_eq!(format_human(bytes), human);
            assert_eq!(parse_pve(pve), Ok(bytes));
        }
    }

    #[test]
    fn exact_units() {
        assert_eq!(exact_mib(8 * GIB), Some(8192));
        assert_eq!(exact_mib(MIB + 1), None);
        assert_eq!(exact_gib(50 * GIB), Some(50));
        assert_eq!(exact_gib(1536 * MIB), None);
    }
}
