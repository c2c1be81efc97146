//! PVE's calendar events (`pve-calendar-event`: backup job and replication schedules), as
//! proxmox-time's parser (`parse_time.rs`, which PVE reaches through
//! `Proxmox::RS::CalendarEvent`) reads them, after PVE's `trim`:
//!
//! ```text
//! event    = special | [weekdays] [date] [time] [" "* "UTC"]   (at least one of the three)
//! special  = minutely | hourly | daily | weekly | monthly | yearly | annually
//!          | quarterly | semiannually | semi-annually          (the whole event)
//! weekdays = wdrange ("," wdrange)* " "*       wdrange = wd [".." wd]
//! wd       = mon | tue | … | sun, or the full English name, any case
//! date     = [list(0..2200) "-"] list(1..13) "-" list(1..32) " "*
//! time     = [list(0..24) ":"] list(0..60) [":" list(0..60)]
//! list(a..b) = "*" ["/" n] | comp ("," comp)*
//! comp     = n [".." n] ["/" n]                      (n: decimal digits, below b; start <= end)
//! ```
//!
//! Only whether an event parses is modelled, not when it fires (PVE's `next-run`).
//! No dependencies, so the kinds (wasm32) and the simulator share it.

const SPECIAL: &[&str] = &[
    "minutely",
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "annually",
    "quarterly",
    "semiannually",
    "semi-annually",
];

const WEEKDAYS: &[(&str, &str)] = &[
    ("mon", "monday"),
    ("tue", "tuesday"),
    ("wed", "wednesday"),
    ("thu", "thursday"),
    ("fri", "friday"),
    ("sat", "saturday"),
    ("sun", "sunday"),
];

/// Check `event` as PVE does; `Err` says what is wrong, in proxmox-time's words where it has
/// them.
pub fn check(event: &str) -> Result<(), String> {
    let text = event.trim();
    if text.is_empty() {
        return Err("empty calendar event".into());
    }
    if SPECIAL.contains(&text) {
        return Ok(());
    }
    let mut rest = text;
    // A trailing time zone: proxmox-time knows UTC only.
    if let Some(r) = rest.strip_suffix("UTC") {
        rest = r.trim_end();
    }
    let mut any = false;
    if rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
        rest = weekdays(rest)?;
        rest = rest.trim_start_matches(' ');
        any = true;
    }
    if let Some(r) = date(rest)? {
        rest = r.trim_start_matches(' ');
        any = true;
    }
    if !rest.is_empty() {
        rest = time(rest)?;
        any = true;
    }
    if !any {
        return Err("expected a date or time specification".into());
    }
    if !rest.is_empty() {
        return Err(format!("unable to parse '{rest}'"));
    }
    Ok(())
}

/// Whether `event` is a PVE calendar event.
pub fn is_calendar_event(event: &str) -> bool {
    check(event).is_ok()
}

fn weekday(s: &str) -> Result<(usize, &str), String> {
    let end = s
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(s.len());
    let word = s[..end].to_ascii_lowercase();
    WEEKDAYS
        .iter()
        .position(|(short, long)| word == *short || word == *long)
        .map(|i| (i, &s[end..]))
        .ok_or_else(|| format!("'{}' is not a weekday", &s[..end]))
}

fn weekdays(mut s: &str) -> Result<&str, String> {
    loop {
        let (_, r) = weekday(s)?;
        s = r;
        if let Some(r) = s.strip_prefix("..") {
            let (_, r) = weekday(r)?;
            s = r;
        }
        match s.strip_prefix(',') {
            Some(r) => s = r,
            None => return Ok(s),
        }
    }
}

/// Decimal digits below `max`.
fn number(s: &str, max: u32) -> Result<(u32, &str), String> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return Err(format!("expected a number at '{s}'"));
    }
    let value: u32 = s[..end]
        .parse()
        .map_err(|_| format!("'{}' is too large", &s[..end]))?;
    if value >= max {
        return Err(format!(
            "time value too large ({value}, at most {})",
            max - 1
        ));
    }
    Ok((value, &s[end..]))
}

/// `list(start..max)`: `*`, `*/n`, or comma-separated components.
fn list(s: &str, max: u32) -> Result<&str, String> {
    if let Some(r) = s.strip_prefix('*') {
        if let Some(r) = r.strip_prefix('/') {
            return number(r, max).map(|(_, r)| r);
        }
        return Ok(r);
    }
    let mut s = s;
    loop {
        let (first, r) = number(s, max)?;
        s = r;
        if let Some(r) = s.strip_prefix("..") {
            let (end, r) = number(r, max)?;
            if first > end {
                return Err("range start is bigger than end".into());
            }
            s = r;
        }
        if let Some(r) = s.strip_prefix('/') {
            s = number(r, max)?.1;
        }
        match s.strip_prefix(',') {
            Some(r) => s = r,
            None => return Ok(s),
        }
    }
}

/// `[year-]month-day`, or `None` (nothing consumed) when `s` does not start with one.
fn date(s: &str) -> Result<Option<&str>, String> {
    let full = list(s, 2200)
        .ok()
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| list(r, 13).ok())
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| list(r, 32).ok());
    if let Some(r) = full {
        return Ok(Some(r));
    }
    let short = list(s, 13)
        .ok()
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| list(r, 32).ok());
    Ok(short)
}

/// `[hour:]minute[:second]`.
fn time(s: &str) -> Result<&str, String> {
    let with_hour = list(s, 24).ok().and_then(|r| r.strip_prefix(':'));
    let r = match with_hour {
        Some(r) => list(r, 60)?,
        None => list(s, 60)?,
    };
    match r.strip_prefix(':') {
        Some(r) => list(r, 60),
        None => Ok(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_parse_as_proxmox_time_reads_them() {
        // The examples of pve-docs' calendar-events.adoc, and systemd forms PVE takes.
        for ok in [
            "minutely",
            "daily",
            "semi-annually",
            "mon,tue,wed,thu,fri",
            "mon..fri",
            "sat,sun",
            "12:05",
            "*/5",
            "0/5",
            "mon..wed 30/10",
            "mon..fri 8..17,22:0/15",
            "fri 12..13:5/20",
            "12,14,16,18,20,22:5",
            "12/2:5",
            "*",
            "*/1",
            "*-05",
            "Sat *-1..7 15:00",
            "2015-10-21",
            "21:00",
            "sun 01:00",
            "*-*-* 02:30:00",
            "monday 3:00",
            "  daily  ",
            "02:00 UTC",
            "mon..fri,sun 22",
            // nom's `opt` backtracks over an hour that is too large: minute 25, second 0.
            "25:00",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok:?}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("   ", "empty"),
            ("funday", "not a weekday"),
            ("25:00:00", "unable to parse"),
            ("12:60", "too large"),
            ("*-13-01", "expected a number"),
            ("mon..fri 8..", "expected a number"),
            ("17..8", "range start is bigger than end"),
            ("12:05 extra", "unable to parse"),
            ("Daily", "not a weekday"),
            ("mon-fri", "expected a number"),
            ("12:", "expected a number"),
            ("UTC", "expected a date or time"),
        ] {
            match check(bad) {
                Ok(()) => panic!("{bad:?} parsed"),
                Err(e) => assert!(e.contains(why), "{bad:?}: {e}"),
            }
        }
    }
}
