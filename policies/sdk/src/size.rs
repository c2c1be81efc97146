//! Sizes as manifests write them (`8GiB`, `512MiB`, `1.5TiB`) and as PVE's wire keys carry
//! them (`memory` in MiB). Parsing and printing are `proxops-units`', shared with the kind SDK;
//! this module keeps the policy SDK's functions and messages.

use proxops_units::{SizeError, format_human, parse_human};

/// Bytes of a binary size such as `8GiB` or `1.5GiB`; the result must be whole bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    parse_human(text).map_err(|e| match e {
        SizeError::NotWhole(_) => format!("`{text}` is not a whole number of bytes"),
        SizeError::TooLarge(_) => format!("`{text}` is too large"),
        _ => format!("`{text}` is not a size; write it like 8GiB or 512MiB"),
    })
}

/// `8GiB`, `1536MiB`: the largest unit that shows `bytes` exactly.
pub fn format_size(bytes: u64) -> String {
    format_human(bytes)
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
