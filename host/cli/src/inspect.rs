//! `proxops kinds` and `proxops schema`: what the binary carries.

use anyhow::bail;
use proxops_reconcile::registry::KindSource;
use proxops_runtime::CacheOutcome;

use crate::context::Context;
use crate::exit;
use crate::output::{self, outln};

pub fn kinds(ctx: &Context, json: bool) -> anyhow::Result<u8> {
    let rows: Vec<serde_json::Value> = ctx
        .kinds
        .iter()
        .map(|(k, source)| {
            serde_json::json!({
                "kind": k.info().kind,
                "api-version": k.info().api_version,
                "folder": k.info().folder,
                "source": match source { KindSource::Bundled => "bundled".to_string(), KindSource::File(f) => format!("file {f}") },
                "sha256": k.sha256(),
                "size": k.size(),
                "cache": match k.cache_outcome() {
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
        "{:<12} {:<18} {:<8} {:<16} {:>9}  CACHE",
        "KIND",
        "API-VERSION",
        "SOURCE",
        "SHA256",
        "SIZE"
    );
    for r in rows {
        let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
        outln!(
            "{:<12} {:<18} {:<8} {:<16} {:>9}  {}",
            s("kind"),
            s("api-version"),
            s("source"),
            &s("sha256")[..16],
            r["size"],
            s("cache")
        );
    }
    Ok(exit::OK)
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
