//! `proxops kinds` and `proxops schema`: what the binary carries.

use anyhow::bail;
use proxops_reconcile::grant::Trust;
use proxops_reconcile::registry::KindSource;
use proxops_runtime::CacheOutcome;

use crate::context::Context;
use crate::exit;
use crate::output::{self, outln};

pub fn kinds(ctx: &Context, json: bool) -> anyhow::Result<u8> {
    let rows: Vec<serde_json::Value> = ctx
        .kinds
        .iter()
        .enumerate()
        .map(|(i, (k, source))| {
            let grant = match ctx.kinds.trust(i) {
                Trust::Bundled => serde_json::Value::Null,
                Trust::Granted(g) => serde_json::json!({
                    "calls": g.calls.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "secrets": g.secrets,
                    "capabilities": g.capabilities,
                    "limits": {
                        "deadline-ms": g.limits.deadline_ms,
                        "memory-mib": g.limits.memory_mib,
                        "output-kib": g.limits.output_kib,
                        "log-lines": g.limits.log_lines,
                        "reads-per-object": g.limits.reads_per_object(),
                        "reads-per-cycle": g.limits.reads_per_cycle,
                    },
                    "warnings": proxops_reconcile::grant::endpoint_capabilities(g)
                        .iter()
                        .map(|c| capability_warning(k.info().kind.as_str(), *c))
                        .collect::<Vec<_>>(),
                }),
            };
            serde_json::json!({
                "kind": k.info().kind,
                "api-version": k.info().api_version,
                "folder": k.info().folder,
                "listings": k.info().listings.iter().map(|l| serde_json::json!({
                    "path": l.path,
                    "id-field": l.id_field,
                })).collect::<Vec<_>>(),
                "source": match source { KindSource::Bundled => "bundled".to_string(), KindSource::File(f) => format!("file {f}") },
                "wit": format!("proxops:kind@{}", k.contract()),
                "grant": grant,
                "sha256": k.sha256(),
                "size": k.size(),
                "cache": match k.cache_outcome() {
                    CacheOutcome::Precompiled => "precompiled",
                    CacheOutcome::Hit => "hit",
                    CacheOutcome::Miss => "miss",
                    CacheOutcome::Rebuilt => "rebuilt",
                    CacheOutcome::Disabled => "off",
                },
            })
        })
        .collect();
    if json {
        output::json(&rows)?;
        return Ok(exit::OK);
    }
    outln!(
        "{:<12} {:<18} {:<8} {:<16} {:>9}  {:<5}  WIT",
        "KIND",
        "API-VERSION",
        "SOURCE",
        "SHA256",
        "SIZE",
        "CACHE"
    );
    for r in &rows {
        let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
        let source = s("source");
        let short = if source == "bundled" {
            "bundled"
        } else {
            "file"
        };
        outln!(
            "{:<12} {:<18} {:<8} {:<16} {:>9}  {:<5}  {}",
            s("kind"),
            s("api-version"),
            short,
            &s("sha256")[..16],
            r["size"],
            s("cache"),
            s("wit")
        );
    }
    // Third-party kinds: where each came from and what it is allowed.
    for r in rows.iter().filter(|r| !r["grant"].is_null()) {
        let g = &r["grant"];
        let list = |k: &str| {
            g[k].as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default()
        };
        outln!();
        outln!(
            "{} ({}, sha256 {})",
            r["kind"].as_str().unwrap_or_default(),
            r["source"].as_str().unwrap_or_default(),
            r["sha256"].as_str().unwrap_or_default()
        );
        outln!("  calls:        {}", list("calls"));
        let listings: Vec<String> = r["listings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| {
                format!(
                    "{} (id: {})",
                    l["path"].as_str().unwrap_or_default(),
                    l["id-field"].as_str().unwrap_or_default()
                )
            })
            .collect();
        outln!(
            "  listings:     {}",
            if listings.is_empty() {
                "none".to_string()
            } else {
                listings.join(", ")
            }
        );
        let refs: Vec<String> = g["secrets"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(r, params)| {
                let params: Vec<&str> = params
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p.as_str())
                    .collect();
                format!("{r} -> {}", params.join("/"))
            })
            .collect();
        outln!(
            "  secrets:      {}",
            if refs.is_empty() {
                "none (references only, never values)".to_string()
            } else {
                format!("{} (references only, never values)", refs.join(", "))
            }
        );
        let caps = list("capabilities");
        outln!(
            "  capabilities: {}",
            if caps.is_empty() {
                "none"
            } else {
                caps.as_str()
            }
        );
        for w in g["warnings"].as_array().into_iter().flatten() {
            outln!("  warning:      {}", w.as_str().unwrap_or_default());
        }
    }
    Ok(exit::OK)
}

/// The warning a granted endpoint capability draws wherever it shows (load, `proxops kinds`,
/// plans that use it).
pub fn capability_warning(kind: &str, c: proxops_core::grant::Capability) -> String {
    format!(
        "the {kind} kind is granted `{c}`: it may send requests that reach beyond one guest ({})",
        proxops_reconcile::grant::capability_reach(c)
    )
}

pub fn schema(ctx: &Context, kind: &str) -> anyhow::Result<u8> {
    let Some(component) = ctx
        .kinds
        .iter()
        .map(|(k, _)| k)
        .find(|k| k.info().kind.eq_ignore_ascii_case(kind))
    else {
        bail!(
            "unknown kind `{kind}`; known kinds: {}",
            ctx.kinds.kind_names()
        );
    };
    let schema: serde_json::Value = serde_json::from_str(&component.info().schema)?;
    output::json(&schema)?;
    Ok(exit::OK)
}
