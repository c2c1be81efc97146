//! Validating `spec.cloud-init-data`: the user, the password and SSH keys (as SOPS references), IP configs and DNS.

use std::collections::BTreeSet;

use proxops_kind_sdk::check::{Checker, index, join};
use proxops_kind_sdk::sets;

use super::Obj;
use crate::desired::*;
use crate::keys::*;
use crate::syntax;

pub(super) fn check_cloud_init_data(
    c: &mut Checker,
    spec: &Obj,
    networks: &[Nic],
) -> Option<CloudInitData> {
    let o = c.object_field(spec, "spec", "cloud-init-data", false, CI_DATA_KEYS)?;
    let p = "spec.cloud-init-data";
    let ci_user = c.string(o, p, "ci-user", false);
    let ssh_keys = c.string_list(o, p, "ssh-keys").unwrap_or_default();
    if ssh_keys.iter().any(|k| k == "*") && ssh_keys.len() > 1 {
        c.error(join(p, "ssh-keys"), "mixes the `*` sentinel (PVE owns the keys) with real keys; use either [\"*\"] or the keys");
    }
    for (i, k) in ssh_keys.iter().enumerate() {
        if k != "*"
            && (k.trim().is_empty() || !k.trim_start().starts_with(['s', 'e']) || !k.contains(' '))
        {
            c.error(
                index(&join(p, "ssh-keys"), i),
                "is not an OpenSSH public key; expected e.g. `ssh-ed25519 AAAA... user@host`",
            );
        }
    }
    let ssh_key_refs = c.string_list(o, p, "ssh-key-refs");
    // The reference: "an empty resolved set fails closed" (never read as "no keys").
    if ssh_key_refs.as_ref().is_some_and(Vec::is_empty) {
        c.error(
            join(p, "ssh-key-refs"),
            "is empty, which proxops never reads as \"no keys\"; list at least one `cloud-init.ssh-keys.<name>`, or remove the field to leave the keys to PVE",
        );
    }
    let ssh_key_refs = ssh_key_refs.unwrap_or_default();
    for (i, r) in ssh_key_refs.iter().enumerate() {
        check_secret_ref(
            c,
            &index(&join(p, "ssh-key-refs"), i),
            r,
            "cloud-init.ssh-keys.",
        );
    }
    if !ssh_keys.is_empty() && !ssh_key_refs.is_empty() {
        c.error(
            join(p, "ssh-key-refs"),
            "ssh-keys and ssh-key-refs are exclusive; keep one of them",
        );
    }
    let ci_password_ref = c.string(o, p, "ci-password-ref", false);
    if let Some(r) = &ci_password_ref {
        check_secret_ref(c, &join(p, "ci-password-ref"), r, "cloud-init.passwords.");
    }
    let nameservers = c.string_list(o, p, "nameservers").unwrap_or_default();
    for (i, ns) in nameservers.iter().enumerate() {
        if !syntax::is_ip(ns) {
            c.error(
                index(&join(p, "nameservers"), i),
                format!("`{ns}` is not an IP address"),
            );
        }
    }
    let search_domains = c.string_list(o, p, "search-domains").unwrap_or_default();
    for (i, d) in search_domains.iter().enumerate() {
        if !syntax::is_dns_name(d) {
            c.error(
                index(&join(p, "search-domains"), i),
                format!("`{d}` is not a DNS domain"),
            );
        }
    }
    let mut ipconfigs = Vec::new();
    if let Some(items) = c.array(o, p, "ipconfigs", false) {
        let nic_slots: BTreeSet<u32> = networks.iter().map(|n| n.slot).collect();
        let mut seen = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let ip_p = index(&join(p, "ipconfigs"), i);
            let Some(e) = c.object(item, &ip_p, IPCONFIG_KEYS) else {
                continue;
            };
            let nic = c.int(e, &ip_p, "nic", true, 0, 31).map(|n| n as u32);
            if let Some(n) = nic {
                if !seen.insert(n) {
                    c.error(
                        join(&ip_p, "nic"),
                        format!("net{n} already has an ipconfig entry"),
                    );
                } else if !networks.is_empty() && !nic_slots.contains(&n) {
                    c.error(
                        join(&ip_p, "nic"),
                        format!("net{n} is not declared in spec.networks"),
                    );
                }
            }
            let ip = c.string(e, &ip_p, "ip", true);
            if let Some(a) = &ip
                && !syntax::is_ipv4_cidr(a)
            {
                c.error(
                    join(&ip_p, "ip"),
                    format!(
                        "`{a}` is not an IPv4 address with prefix length, e.g. 192.168.0.50/24"
                    ),
                );
            }
            let gateway = c.string(e, &ip_p, "gateway", false);
            if let Some(g) = &gateway
                && !syntax::is_ipv4(g)
            {
                c.error(
                    join(&ip_p, "gateway"),
                    format!("`{g}` is not an IPv4 address"),
                );
            }
            if let (Some(nic), Some(ip)) = (nic, ip) {
                ipconfigs.push(IpConfig { nic, ip, gateway });
            }
        }
    }
    Some(CloudInitData {
        ci_user,
        ssh_keys,
        ssh_key_refs,
        ci_password_ref,
        nameservers: sets::normalize(&nameservers),
        search_domains: sets::normalize(&search_domains),
        ipconfigs,
    })
}

fn check_secret_ref(c: &mut Checker, path: &str, r: &str, prefix: &str) {
    match r.strip_prefix(prefix) {
        Some(name) if !name.is_empty() && !name.contains('.') => {}
        _ => c.error(
            path,
            format!("`{r}` is not a SOPS reference; expected `{prefix}<name>`"),
        ),
    }
}
