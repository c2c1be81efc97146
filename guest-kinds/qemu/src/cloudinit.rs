//! Cloud-init data (`spec.cloud-init-data`) on the wire: `ciuser`, `sshkeys`, `cipassword`,
//! `nameserver`, `searchdomain`, `ipconfig<N>`, and the resolution of its SOPS references.
//!
//! Wire mappings:
//! * `sshkeys`: the keys joined with `\n`, then percent-encoded inside the value (PVE's
//!   `urlencoded` format, `^[-%a-zA-Z0-9_.!~*'()]*$`): every byte outside `A-Za-z0-9-_.~` becomes
//!   `%XX` with upper-case hex, so a space is `%20` (never `+`) and the separator `%0A`. The host's
//!   form layer encodes the result once more, as PVE expects. Compared as the set of decoded,
//!   trimmed, non-empty key lines (inner whitespace runs folded), so re-encoding or reordering
//!   is never drift.
//! * `nameserver` / `searchdomain`: space-separated; compared as sets.
//! * `ipconfig<N>`: `ip=<cidr>[,gw=<addr>]`; compared on its parsed tokens, and the manifest
//!   owns the whole value (a live `ip6=`/`gw6=`/`dhcp` differs and is rewritten).
//! * `cipassword`: written only when absent on the live side; never compared, never deleted.

use std::collections::BTreeSet;

use proxops_kind_sdk::check::{Diag, index, join};
use proxops_kind_sdk::propstring::PropString;

use crate::desired::{CloudInitData, IpConfig};
use crate::secrets::{Secret, Secrets};

/// Field path of the cloud-init data block.
pub const PATH: &str = "spec.cloud-init-data";

/// The identity keys a clone inherits from its template and must not keep when the manifest
/// does not declare them (`ipconfig<N>` besides these).
pub const IDENTITY_KEYS: &[&str] = &["ciuser", "sshkeys", "nameserver", "searchdomain"];

/// Percent-encode a value for PVE's `urlencoded` format.
pub fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decode a percent-encoded value; `None` when it is not valid percent-encoding of UTF-8.
pub fn urldecode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The key lines of a decoded `sshkeys` text: trimmed, inner whitespace folded, empty lines
/// dropped, in order.
pub fn key_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect()
}

/// The key set of a live `sshkeys` value (decoded; a value that does not decode is read raw).
pub fn live_key_set(live: &str) -> BTreeSet<String> {
    let text = urldecode(live).unwrap_or_else(|| live.to_string());
    key_lines(&text).into_iter().collect()
}

/// The wire value for keys.
pub fn sshkeys_value(keys: &[String]) -> String {
    urlencode(&keys.join("\n"))
}

/// Whether a line looks like an OpenSSH public key (type, space, material).
pub fn looks_like_key(k: &str) -> bool {
    let k = k.trim();
    !k.is_empty() && k.starts_with(['s', 'e']) && k.contains(' ')
}

/// The wire value of an `ipconfig<N>`.
pub fn ipconfig_value(ip: &IpConfig) -> String {
    match &ip.gateway {
        Some(g) => format!("ip={},gw={g}", ip.ip),
        None => format!("ip={}", ip.ip),
    }
}

/// Whether a live `ipconfig<N>` equals the desired one (token order and spelling aside).
pub fn ipconfig_eq(live: &str, ip: &IpConfig) -> bool {
    let Ok(p) = PropString::parse(live) else {
        return false;
    };
    let mut tokens: Vec<(String, String)> = p.items.clone();
    if let Some(b) = &p.bare {
        tokens.push(("ip".into(), b.clone()));
    }
    tokens.sort();
    let mut want = vec![("ip".to_string(), ip.ip.clone())];
    if let Some(g) = &ip.gateway {
        want.push(("gw".into(), g.clone()));
    }
    want.sort();
    tokens == want
}

/// A live space- or comma-separated list as a set.
pub fn live_list(live: &str) -> BTreeSet<String> {
    live.split([' ', ',', '\t', '\n'])
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// What the manifest wants for `sshkeys`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keys {
    /// Not owned (nothing declared).
    NotOwned,
    /// The `*` sentinel: PVE owns the live value.
    PveOwned,
    /// Keys from the manifest.
    Literal(Vec<String>),
    /// Keys resolved from `ssh-key-refs` (one line each, manifest order).
    Secret(Vec<Secret>),
}

impl Keys {
    /// The desired key lines, when owned.
    pub fn lines(&self) -> Option<Vec<String>> {
        match self {
            Keys::Literal(k) => Some(k.iter().flat_map(|k| key_lines(k)).collect()),
            Keys::Secret(k) => Some(k.iter().map(|s| s.expose().to_string()).collect()),
            Keys::NotOwned | Keys::PveOwned => None,
        }
    }

    /// Whether the value is derived from a secret.
    pub fn sensitive(&self) -> bool {
        matches!(self, Keys::Secret(_))
    }
}

/// The cloud-init data with its references resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// `sshkeys`.
    pub keys: Keys,
    /// `cipassword`, when a ref is declared.
    pub password: Option<Secret>,
}

/// Resolve the SOPS references of `ci` (none declared: nothing is looked up). Every failure
/// is an error naming the reference, never a value.
pub fn resolve(ci: Option<&CloudInitData>, secrets: &dyn Secrets) -> Result<Resolved, Vec<Diag>> {
    let Some(ci) = ci else {
        return Ok(Resolved {
            keys: Keys::NotOwned,
            password: None,
        });
    };
    let mut errors = Vec::new();
    let keys = if ci.ssh_keys.iter().any(|k| k == "*") {
        Keys::PveOwned
    } else if !ci.ssh_keys.is_empty() {
        Keys::Literal(ci.ssh_keys.clone())
    } else if !ci.ssh_key_refs.is_empty() {
        let refs_path = join(PATH, "ssh-key-refs");
        let mut lines = Vec::new();
        let mut all_ok = true;
        for (i, r) in ci.ssh_key_refs.iter().enumerate() {
            let at = index(&refs_path, i);
            match secrets.resolve(r) {
                Ok(v) => {
                    let found = key_lines(v.expose());
                    if found.is_empty() {
                        // Blank lines only: an empty entry, even when other refs hold keys.
                        all_ok = false;
                        errors.push(Diag::error(
                            at,
                            crate::secrets::SecretError::Empty.message(r),
                        ));
                    } else if found.iter().any(|k| !looks_like_key(k)) {
                        all_ok = false;
                        errors.push(Diag::error(
                            at,
                            format!("`{r}` does not hold OpenSSH public keys (one `<type> <base64> [comment]` per line)"),
                        ));
                    } else {
                        lines.extend(found.into_iter().map(Secret::new));
                    }
                }
                Err(e) => {
                    all_ok = false;
                    errors.push(Diag::error(at, e.message(r)));
                }
            }
        }
        if all_ok && lines.is_empty() {
            errors.push(Diag::error(
                refs_path,
                "the references resolve to no keys; an empty key set is never written as \"no keys\"",
            ));
        }
        Keys::Secret(lines)
    } else {
        Keys::NotOwned
    };
    let password = match &ci.ci_password_ref {
        Some(r) => match secrets.resolve(r) {
            Ok(v) if v.expose().trim().is_empty() => {
                errors.push(Diag::error(
                    join(PATH, "ci-password-ref"),
                    crate::secrets::SecretError::Empty.message(r),
                ));
                None
            }
            Ok(v) => Some(v),
            Err(e) => {
                errors.push(Diag::error(join(PATH, "ci-password-ref"), e.message(r)));
                None
            }
        },
        None => None,
    };
    if errors.is_empty() {
        Ok(Resolved { keys, password })
    } else {
        Err(errors)
    }
}

/// The cloud-init data keys of a new VM, `(key, value, sensitive)`, in a fixed order.
pub fn create_params(ci: Option<&CloudInitData>, r: &Resolved) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    let Some(ci) = ci else {
        return out;
    };
    if let Some(u) = &ci.ci_user {
        out.push(("ciuser".into(), u.clone(), false));
    }
    if let Some(p) = &r.password {
        out.push(("cipassword".into(), p.expose().to_string(), true));
    }
    if let Some(lines) = r.keys.lines() {
        out.push(("sshkeys".into(), sshkeys_value(&lines), r.keys.sensitive()));
    }
    if !ci.nameservers.is_empty() {
        out.push(("nameserver".into(), ci.nameservers.join(" "), false));
    }
    if !ci.search_domains.is_empty() {
        out.push(("searchdomain".into(), ci.search_domains.join(" "), false));
    }
    for ip in &ci.ipconfigs {
        out.push((format!("ipconfig{}", ip.nic), ipconfig_value(ip), false));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips() {
        for (raw, wire) in [
            (
                "ssh-ed25519 AAAAC3Nza+/= a@b",
                "ssh-ed25519%20AAAAC3Nza%2B%2F%3D%20a%40b",
            ),
            ("a\nb", "a%0Ab"),
            ("x-y_z.~", "x-y_z.~"),
            ("é", "%C3%A9"),
        ] {
            assert_eq!(urlencode(raw), wire, "{raw}");
            assert_eq!(urldecode(wire).as_deref(), Some(raw), "{wire}");
        }
        for bad in ["%", "%4", "%zz", "%FF"] {
            assert_eq!(urldecode(bad), None, "{bad}");
        }
        // PVE's own UI encodes lower-case hex and keeps `!*'()`; the set is the same.
        assert_eq!(
            live_key_set("ssh-rsa%20AA%2b%0d%0Assh-ed25519%20BB!%0A"),
            ["ssh-ed25519 BB!".to_string(), "ssh-rsa AA+".to_string()].into()
        );
    }

    #[test]
    fn ipconfigs_compare_parsed() {
        let ip = IpConfig {
            nic: 0,
            ip: "10.0.0.5/24".into(),
            gateway: Some("10.0.0.1".into()),
        };
        assert_eq!(ipconfig_value(&ip), "ip=10.0.0.5/24,gw=10.0.0.1");
        for (live, eq) in [
            ("ip=10.0.0.5/24,gw=10.0.0.1", true),
            ("gw=10.0.0.1,ip=10.0.0.5/24", true),
            ("ip=10.0.0.5/24", false),
            ("ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto", false),
            ("ip=dhcp", false),
            ("", false),
        ] {
            assert_eq!(ipconfig_eq(live, &ip), eq, "{live}");
        }
    }
}
