//! Unix time as a UTC calendar date and time of day, for the places that print one (the SOPS
//! file's `lastmodified`, the status page, the simulator's HA status): one conversion, no
//! dependencies.

/// A UTC instant split into its calendar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    /// 1 to 12.
    pub month: u32,
    /// 1 to 31.
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    /// Days since 1970-01-01 (a Thursday), for a weekday name.
    pub days: i64,
}

/// `secs` since the Unix epoch as a UTC date and time (the proleptic Gregorian calendar, by
/// Howard Hinnant's days-to-civil algorithm).
pub fn from_unix(secs: u64) -> Civil {
    let days = (secs / 86_400) as i64;
    let rest = (secs % 86_400) as u32;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    Civil {
        year: yoe + era * 400 + i64::from(month <= 2),
        month,
        day,
        hour: rest / 3_600,
        minute: rest % 3_600 / 60,
        second: rest % 60,
        days,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        let check = |secs: u64, want: (i64, u32, u32, u32, u32, u32)| {
            let c = from_unix(secs);
            assert_eq!(
                (c.year, c.month, c.day, c.hour, c.minute, c.second),
                want,
                "{secs}"
            );
        };
        check(0, (1970, 1, 1, 0, 0, 0));
        check(951_782_400, (2000, 2, 29, 0, 0, 0));
        check(951_868_799, (2000, 2, 29, 23, 59, 59));
        check(1_764_420_389, (2025, 11, 29, 12, 46, 29));
        check(1_764_918_182, (2025, 12, 5, 7, 3, 2));
        check(4_107_542_399, (2100, 2, 28, 23, 59, 59));
        check(4_107_542_400, (2100, 3, 1, 0, 0, 0));
    }
}
