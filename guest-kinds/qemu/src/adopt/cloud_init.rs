//! Adopting the cloud-init data: user, DNS, IP configs, and the SSH keys as SOPS references
//! where every key line is one.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use proxops_kind_sdk::propstring::PropString;

use super::{Adoption, SSH_KEY_PREFIX};
use crate::secrets::Secrets;
use crate::{cloudinit, syntax};

impl Adoption {
    pub(super) fn take_cloud_init_data(
        &mut self,
        nic_slots: &BTreeSet<u32>,
        secrets: &dyn Secrets,
    ) -> Map<String, Value> {
        let mut ci = Map::new();
        if let Some(u) = self.take("ciuser") {
            ci.insert("ci-user".into(), json!(u));
        }
        if let Some(k) = self.take("sshkeys") {
            let text = cloudinit::urldecode(&k).unwrap_or(k);
            let lines = cloudinit::key_lines(&text);
            if !lines.is_empty() {
                let (field, value) = self.ssh_keys(&lines, secrets);
                ci.insert(field.into(), value);
            }
        }
        for (key, field, ok) in [
            (
                "nameserver",
                "nameservers",
                syntax::is_ip as fn(&str) -> bool,
            ),
            ("searchdomain", "search-domains", syntax::is_dns_name),
        ] {
            if let Some(v) = self.take(key) {
                let list: Vec<String> = cloudinit::live_list(&v).into_iter().collect();
                if !list.is_empty() && list.iter().all(|x| ok(x)) {
                    ci.insert(field.into(), json!(list));
                } else {
                    self.gap(
                        key,
                        format!("`{v}` is not a list the manifest accepts; left unowned"),
                    );
                }
            }
        }
        let ipkeys = self.slots("ipconfig", u32::MAX);
        let mut ips = Vec::new();
        for key in ipkeys {
            let v = self.take(&key).unwrap_or_default();
            let n = syntax::split_slot(&key).map(|(_, n)| n).unwrap_or_default();
            let p = PropString::parse(&v).ok();
            let ip = p
                .as_ref()
                .and_then(|p| p.get("ip"))
                .filter(|ip| syntax::is_ipv4_cidr(ip));
            let gw = p.as_ref().and_then(|p| p.get("gw"));
            let only = p.as_ref().is_some_and(|p| {
                p.bare.is_none() && p.items.iter().all(|(k, _)| k == "ip" || k == "gw")
            });
            match ip {
                Some(ip) if only && gw.is_none_or(syntax::is_ipv4) && nic_slots.contains(&n) => {
                    let mut e = Map::new();
                    e.insert("nic".into(), json!(n));
                    e.insert("ip".into(), json!(ip));
                    if let Some(g) = gw {
                        e.insert("gateway".into(), json!(g));
                    }
                    ips.push(Value::Object(e));
                }
                _ => self.gap(&key, format!("`{v}` is not a static IPv4 config of a declared NIC (DHCP and IPv6 are not modelled); left unowned")),
            }
        }
        if !ips.is_empty() {
            ci.insert("ipconfigs".into(), Value::Array(ips));
        }
        ci
    }

    /// `ssh-key-refs` when every key line is a SOPS entry below `cloud-init.ssh-keys`,
    /// else the `["*"]` sentinel (PVE keeps owning the keys) and a gap.
    pub(super) fn ssh_keys(
        &mut self,
        lines: &[String],
        secrets: &dyn Secrets,
    ) -> (&'static str, Value) {
        let mut refs: Vec<String> = Vec::new();
        let mut unmatched = 0;
        for line in lines {
            let prefix = format!("{SSH_KEY_PREFIX}.");
            match secrets.find(SSH_KEY_PREFIX, line) {
                Ok(Some(path))
                    if path
                        .strip_prefix(&prefix)
                        .is_some_and(|n| !n.is_empty() && !n.contains('.')) =>
                {
                    if !refs.contains(&path) {
                        refs.push(path);
                    }
                }
                _ => unmatched += 1,
            }
        }
        if unmatched == 0 {
            return ("ssh-key-refs", json!(refs));
        }
        self.gap(
            "sshkeys",
            format!("redacted to [\"*\"] (PVE keeps owning the keys): {unmatched} of {} key lines are not an entry under {SSH_KEY_PREFIX} in the cluster's SOPS document; add them there (or adopt with --adopt-secrets) to get ssh-key-refs", lines.len()),
        );
        ("ssh-keys", json!(["*"]))
    }
}
