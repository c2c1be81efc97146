//! PVE property strings (`virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,tag=10`,
//! `local-lvm:vm-100-disk-0,size=32G`): order-preserving parse, edit and print.
//!
//! An item is either `key=value` or a bare value (the format's default key, such as a drive's
//! `file` or a NIC's model). The parser keeps the order it read so that unowned tokens survive a
//! rewrite verbatim; [`PropString::canonical`] prints in PVE's own order (bare value first, then
//! keys sorted) so that what proxops writes is what PVE will print back.

use std::fmt;

/// Why a property string could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropError {
    /// An empty item, as in `a,,b` or a trailing comma.
    EmptyItem(usize),
    /// An item like `=x` with no key.
    EmptyKey(usize),
    /// The same key twice.
    DuplicateKey(String),
    /// More than one bare value.
    SecondBareValue(String),
}

impl fmt::Display for PropError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropError::EmptyItem(i) => write!(f, "empty item at position {}", i + 1),
            PropError::EmptyKey(i) => write!(f, "item {} has `=` but no key", i + 1),
            PropError::DuplicateKey(k) => write!(f, "key `{k}` appears more than once"),
            PropError::SecondBareValue(v) => {
                write!(
                    f,
                    "bare value `{v}` after another bare value; expected key=value"
                )
            }
        }
    }
}

/// A parsed property string, in the order it was written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PropString {
    /// The bare value (default key), when there is one.
    pub bare: Option<String>,
    /// `key=value` items, in order.
    pub items: Vec<(String, String)>,
    /// Whether the bare value came first (it always does in what PVE prints).
    bare_first: bool,
}

impl PropString {
    /// An empty property string.
    pub fn new() -> Self {
        PropString {
            bare: None,
            items: Vec::new(),
            bare_first: true,
        }
    }

    /// A property string with a bare value and no items.
    pub fn with_bare(bare: impl Into<String>) -> Self {
        PropString {
            bare: Some(bare.into()),
            items: Vec::new(),
            bare_first: true,
        }
    }

    /// Parse `a,b=c,d=e`. A value may itself contain `=` (`boot=order=scsi0;net0`).
    pub fn parse(s: &str) -> Result<Self, PropError> {
        let mut out = PropString::new();
        if s.is_empty() {
            return Ok(out);
        }
        for (i, item) in s.split(',').enumerate() {
            if item.is_empty() {
                return Err(PropError::EmptyItem(i));
            }
            match item.split_once('=') {
                Some(("", _)) => return Err(PropError::EmptyKey(i)),
                Some((k, v)) => {
                    if out.items.iter().any(|(key, _)| key == k) {
                        return Err(PropError::DuplicateKey(k.to_string()));
                    }
                    out.items.push((k.to_string(), v.to_string()));
                }
                None => {
                    if out.bare.is_some() {
                        return Err(PropError::SecondBareValue(item.to_string()));
                    }
                    out.bare_first = out.items.is_empty();
                    out.bare = Some(item.to_string());
                }
            }
        }
        Ok(out)
    }

    /// Parse, folding `default_key=value` into the bare value so that `file=x,size=1G` and
    /// `x,size=1G` read the same.
    pub fn parse_with_default(s: &str, default_key: &str) -> Result<Self, PropError> {
        let mut p = Self::parse(s)?;
        if let Some(pos) = p.items.iter().position(|(k, _)| k == default_key) {
            let (_, v) = p.items.remove(pos);
            if let Some(b) = &p.bare {
                return Err(PropError::SecondBareValue(b.clone()));
            }
            p.bare = Some(v);
            p.bare_first = true;
        }
        Ok(p)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `key` is present.
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Set `key` to `value`, in place when present, else appended.
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.items.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.items.push((key.to_string(), value)),
        }
    }

    /// Remove `key`; returns its old value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let pos = self.items.iter().position(|(k, _)| k == key)?;
        Some(self.items.remove(pos).1)
    }

    /// Print in PVE's order: bare value first, then keys sorted alphabetically.
    pub fn canonical(&self) -> String {
        let mut items: Vec<&(String, String)> = self.items.iter().collect();
        items.sort_by(|a, b| a.0.cmp(&b.0));
        let mut parts: Vec<String> = Vec::new();
        if let Some(b) = &self.bare {
            parts.push(b.clone());
        }
        parts.extend(items.iter().map(|(k, v)| format!("{k}={v}")));
        parts.join(",")
    }
}

impl fmt::Display for PropString {
    /// Print in the order read (or built).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self.items.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if let Some(b) = &self.bare {
            if self.bare_first {
                parts.insert(0, b.clone());
            } else {
                parts.push(b.clone());
            }
        }
        f.write_str(&parts.join(","))
    }
}

/// Read a PVE boolean token inside a property string (`1|on|yes|true`, `0|off|no|false`).
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => Some(true),
        "0" | "off" | "no" | "false" => Some(false),
        _ => None,
    }
}

/// Print a boolean the way PVE does inside property strings.
pub fn print_bool(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a parse should give: `(bare, items)` or an error text.
    type Expected<'a> = Result<(Option<&'a str>, &'a [(&'a str, &'a str)]), &'a str>;

    /// Parse `input`; expect `expected`; and check the round trip.
    fn check(input: &str, expected: Expected<'_>) {
        let got = PropString::parse(input);
        match (got, expected) {
            (Ok(p), Ok((bare, items))) => {
                assert_eq!(p.bare.as_deref(), bare, "bare of {input:?}");
                let got: Vec<(&str, &str)> = p
                    .items
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                assert_eq!(got, items, "items of {input:?}");
                assert_eq!(p.to_string(), input, "round trip of {input:?}");
            }
            (Err(e), Err(msg)) => assert_eq!(e.to_string(), msg, "error of {input:?}"),
            (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn parse_cases() {
        check(
            "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,tag=10",
            Ok((
                None,
                &[
                    ("virtio", "BC:24:11:AA:BB:CC"),
                    ("bridge", "vmbr0"),
                    ("tag", "10"),
                ],
            )),
        );
        check(
            "local-lvm:vm-100-disk-0,size=32G",
            Ok((Some("local-lvm:vm-100-disk-0"), &[("size", "32G")])),
        );
        check(
            "order=scsi0;ide2;net0",
            Ok((None, &[("order", "scsi0;ide2;net0")])),
        );
        check("socket", Ok((Some("socket"), &[])));
        check("", Ok((None, &[])));
        check("a=b=c", Ok((None, &[("a", "b=c")])));
        check(
            "size=1G,local:iso/x.iso",
            Ok((Some("local:iso/x.iso"), &[("size", "1G")])),
        );
        check("a,,b", Err("empty item at position 2"));
        check("a,", Err("empty item at position 2"));
        check("=x", Err("item 1 has `=` but no key"));
        check("a=1,a=2", Err("key `a` appears more than once"));
        check(
            "x,y",
            Err("bare value `y` after another bare value; expected key=value"),
        );
    }

    #[test]
    fn default_key_folding() {
        let p =
            PropString::parse_with_default("file=local-lvm:vm-1-disk-0,size=4M", "file").unwrap();
        assert_eq!(p.bare.as_deref(), Some("local-lvm:vm-1-disk-0"));
        assert_eq!(p.to_string(), "local-lvm:vm-1-disk-0,size=4M");
        let p =
            PropString::parse_with_default("enabled=1,fstrim_cloned_disks=1", "enabled").unwrap();
        assert_eq!(p.bare.as_deref(), Some("1"));
    }

    #[test]
    fn edit_and_print() {
        let mut p = PropString::parse("virtio=BC:24:11:AA:BB:CC,tag=10,bridge=vmbr0").unwrap();
        p.set("tag", "20");
        p.set("firewall", "1");
        assert_eq!(p.remove("bridge").as_deref(), Some("vmbr0"));
        assert_eq!(p.to_string(), "virtio=BC:24:11:AA:BB:CC,tag=20,firewall=1");
        assert_eq!(p.canonical(), "firewall=1,tag=20,virtio=BC:24:11:AA:BB:CC");
        let mut d = PropString::with_bare("local-lvm:32");
        d.set("iothread", "1");
        d.set("discard", "on");
        assert_eq!(d.canonical(), "local-lvm:32,discard=on,iothread=1");
    }

    #[test]
    fn booleans() {
        for (v, b) in [
            ("1", Some(true)),
            ("on", Some(true)),
            ("Yes", Some(true)),
            ("true", Some(true)),
        ] {
            assert_eq!(parse_bool(v), b);
        }
        for (v, b) in [
            ("0", Some(false)),
            ("off", Some(false)),
            ("no", Some(false)),
            ("x", None),
        ] {
            assert_eq!(parse_bool(v), b);
        }
        assert_eq!(print_bool(true), "1");
    }

    /// Property test with a fixed seed and case count (a fuzz target's cheap cousin that runs
    /// in CI): any short string over the property-string alphabet parses without panicking,
    /// and whatever parses prints back to the same value.
    #[test]
    fn any_short_string_parses_without_panic_and_round_trips() {
        const ALPHABET: &[char] = &['a', 'b', '=', ',', '1', ';', ' ', 'é'];
        let mut state: u64 = 0x005E_ED0F_BEEF;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = (next() % 12) as usize;
            let text: String = (0..len)
                .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                .collect();
            let Ok(parsed) = PropString::parse(&text) else {
                continue;
            };
            let printed = parsed.to_string();
            assert_eq!(
                PropString::parse(&printed).as_ref(),
                Ok(&parsed),
                "{text:?} -> {printed:?}"
            );
            let canonical = PropString::parse(&parsed.canonical()).expect("canonical parses");
            assert_eq!(canonical.bare, parsed.bare, "{text:?}");
            let mut a = canonical.items.clone();
            let mut b = parsed.items.clone();
            a.sort();
            b.sort();
            assert_eq!(a, b, "{text:?}");
            let _ = PropString::parse_with_default(&text, "a");
        }
    }
}
