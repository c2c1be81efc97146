//! PVE's text grammars that the parameter checks (`schema`) and the named formats
//! (`formats`) share: patterns (anchored at both ends as JSONSchema.pm does, Perl-isms
//! translated), booleans, and a property-string format's default key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value};

/// The compiled pattern, shared: a cloned `Regex` would start with an empty match cache.
fn compiled(pattern: &str) -> Option<Arc<regex_automata::meta::Regex>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<regex_automata::meta::Regex>>>> =
        OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut guard = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = guard.get(pattern) {
        return Some(r.clone());
    }
    // Perl-isms in PVE's patterns: `(?^:` flag groups, atomic groups and `{,n}`.
    let translated = pattern
        .replace("(?^:", "(?:")
        .replace("(?>", "(?:")
        .replace("{,", "{0,");
    let anchored = format!("^(?:{translated})$");
    let r = Arc::new(regex_automata::meta::Regex::new(&anchored).ok()?);
    guard.insert(pattern.to_string(), r.clone());
    Some(r)
}

/// True when `value` matches PVE's pattern, anchored at both ends as JSONSchema.pm does.
pub(crate) fn matches_pattern(pattern: &str, value: &str) -> bool {
    match compiled(pattern) {
        Some(r) => r.is_match(value),
        None => true,
    }
}

/// PVE's `parse_boolean` for values inside property strings.
pub(crate) fn parse_boolean(v: &str) -> Option<&'static str> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => Some("1"),
        "0" | "off" | "no" | "false" => Some("0"),
        _ => None,
    }
}

/// The key marked `default_key` in a property-string format.
pub(crate) fn default_key(format: &Map<String, Value>) -> Option<String> {
    format
        .iter()
        .find(|(_, s)| s.get("default_key").is_some_and(|d| d.as_i64() == Some(1)))
        .map(|(k, _)| k.clone())
}
