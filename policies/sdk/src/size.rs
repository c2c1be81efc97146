//! Sizes as manifests write them (`8GiB`, `512MiB`, `1.5TiB`) and as PVE's wire keys carry
//! them (`memory` in MiB).

const UNITS: &[(&str, u64)] = &[
    ("TiB", 1 << 40),
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("B", 1),
];

/// Bytes of a binary size such as `8GiB` or `1.5GiB`; the result must be whole bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let (number, factor) = UNITS
        .iter()
        .find_map(|(unit, factor)| s.strip_suffix(unit).map(|n| (n.trim(), *factor)))
        .ok_or_else(|| format!("`{text}` is not a size; write it like 8GiB or 512MiB"))?;
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || frac.len() > 12 {
        return Err(format!(
            "`{text}` is not a size; write it like 8GiB or 512MiB"
        ));
    }
    let too_large = || format!("`{text}` is too large");
    let int: u128 = int.parse().map_err(|_| too_large())?;
    let mut total = int * factor as u128;
    if !frac.is_empty() {
        let den = 10u128.pow(frac.len() as u32);
        let scaled = frac.parse::<u128>().map_err(|_| too_large())? * factor as u128;
        if !scaled.is_multiple_of(den) {
            return Err(format!("`{text}` is not a whole number of bytes"));
        }
        total += scaled / den;
    }
    u64::try_from(total).map_err(|_| too_large())
}

/// `8GiB`, `1536MiB`: the largest unit that shows `bytes` exactly.
pub fn format_size(bytes: u64) -> String {
    for (unit, factor) in UNITS {
        if bytes >= *factor && bytes.is_multiple_of(*factor) {
            return format!("{}{unit}", bytes / factor);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let cases: &[(&str, Option<u64>)] = &[
            ("8GiB", Some(8 << 30)),
            ("512MiB", Some(512 << 20)),
            ("1.5GiB", Some(3 << 29)),
            (" 2 TiB ", Some(2 << 40)),
            ("4096B", Some(4096)),
            ("1.3B", None),
            ("8GB", None),
            ("GiB", None),
            ("-1GiB", None),
            ("8", None),
            ("99999999999999999999TiB", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_size(text).ok(), *want, "{text}");
        }
        assert_eq!(format_size(3 << 29), "1536MiB");
        assert_eq!(format_size(16 << 30), "16GiB");
        assert_eq!(format_size(0), "0B");
    }
}
