//! PVE's parameter schema (an embedded, trimmed copy of the vendored pve-api-schema.json), its generator, and a
//! validator that reproduces JSONSchema.pm's messages.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::formats;
use crate::grammar::{default_key, matches_pattern, parse_boolean};

/// The trimmed schema: `{path: {method: {parameters, returns}}}` for every endpoint the simulator serves.
pub(crate) const SCHEMA_JSON: &str = include_str!("../schema/pve-api-sim.json");

/// Endpoints served, one `METHOD /path/template` per line; the schema file is generated from this list.
pub(crate) const SERVED: &str = include_str!("../schema/served.txt");

/// Schemas of served endpoints that the vendored subset of PVE's schema does not carry, in its shape.
pub(crate) const SUPPLEMENT_JSON: &str = include_str!("../schema/supplement.json");

/// Keys dropped from the vendored schema when the trimmed copy is generated (documentation only).
pub(crate) const DROPPED_KEYS: [&str; 6] = [
    "description",
    "verbose_description",
    "format_description",
    "typetext",
    "renderer",
    "title",
];

/// Drops the documentation keys (string values only: `title` may also name a property).
fn strip_docs(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !(v.is_string() && DROPPED_KEYS.contains(&k.as_str())))
                .map(|(k, v)| (k.clone(), strip_docs(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_docs).collect()),
        other => other.clone(),
    }
}

/// The trimmed schema text for the served endpoints: `{path: {method: {parameters, returns}}}`, taken from
/// `full` (`{"paths": {path: {method: info}}}`, PVE's schema) or else from the supplement, pretty-printed.
/// An endpoint in neither, or in both (a stale supplement), is an error naming it.
pub(crate) fn trimmed(full: &Value) -> Result<String, String> {
    let supplement: Value =
        serde_json::from_str(SUPPLEMENT_JSON).map_err(|e| format!("supplement.json: {e}"))?;
    let mut out = Map::new();
    for line in SERVED.lines().filter(|l| !l.trim().is_empty()) {
        let (method, path) = line
            .split_once(' ')
            .ok_or_else(|| format!("served.txt: '{line}' is not 'METHOD PATH'"))?;
        let from_full = full["paths"][path][method].as_object();
        let from_supplement = supplement["paths"][path][method].as_object();
        let e = match (from_full, from_supplement) {
            (Some(e), None) | (None, Some(e)) => e,
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{method} {path} is in PVE's schema now: remove it from supplement.json"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "{method} {path} is in neither PVE's schema nor supplement.json"
                ));
            }
        };
        let entry = out
            .entry(path.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(methods) = entry {
            methods.insert(
                method.to_string(),
                serde_json::json!({
                    "parameters": strip_docs(e.get("parameters").unwrap_or(&Value::Object(Map::new()))),
                    "returns": strip_docs(e.get("returns").unwrap_or(&Value::Object(Map::new()))),
                }),
            );
        }
    }
    serde_json::to_string_pretty(&Value::Object(out))
        .map(|text| text + "\n")
        .map_err(|e| e.to_string())
}

/// Parameter errors keyed by parameter name, as PVE's `errors` object.
pub(crate) type Errors = BTreeMap<String, String>;

const NOT_IN_SCHEMA: &str =
    "property is not defined in schema and the schema does not allow additional properties";
const MISSING: &str = "property is missing and it is not optional";

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::from_str(SCHEMA_JSON).expect("embedded schema is valid JSON"))
}

/// The `parameters.properties` object of one endpoint.
pub(crate) fn parameters(method: &str, template: &str) -> Option<&'static Map<String, Value>> {
    schema()
        .get(template)?
        .get(method)?
        .get("parameters")?
        .get("properties")?
        .as_object()
}

/// The `returns` schema of one endpoint.
pub(crate) fn returns(method: &str, template: &str) -> Option<&'static Value> {
    schema().get(template)?.get(method)?.get("returns")
}

/// Highest index PVE allows for an indexed key family such as `scsi` (qemu-server's
/// `PVE/QemuServer/Drive.pm`: `$MAX_IDE_DISKS`, `$MAX_SATA_DISKS`, … and `$MAX_NETS`).
pub(crate) fn index_max(family: &str) -> Option<u32> {
    Some(match family {
        "ide" => 3,
        "sata" => 5,
        "scsi" => 30,
        "virtio" => 15,
        "unused" => 255,
        "net" | "ipconfig" => 31,
        "serial" => 3,
        "parallel" => 2,
        "hostpci" => 15,
        "numa" => 7,
        "usb" => 14,
        "virtiofs" => 9,
        "mp" | "dev" => 255,
        _ => return None,
    })
}

/// Splits `scsi12` into (`scsi`, 12); `None` for keys without a numeric suffix or with a leading zero.
pub(crate) fn split_indexed(key: &str) -> Option<(&str, u32)> {
    let pos = key.find(|c: char| c.is_ascii_digit())?;
    let (family, digits) = key.split_at(pos);
    if family.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return None;
    }
    let n: u32 = digits.parse().ok()?;
    Some((family, n))
}

/// Looks a key up in a properties object, resolving `family[n]` entries for indexed keys.
pub(crate) fn find_property<'a>(props: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if let Some(v) = props.get(key) {
        return Some(v);
    }
    let (family, n) = split_indexed(key)?;
    let v = props.get(&format!("{family}[n]"))?;
    if n > index_max(family)? {
        return None;
    }
    Some(v)
}

fn is_optional(schema: &Value) -> bool {
    match schema.get("optional") {
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        Some(Value::Bool(b)) => *b,
        _ => false,
    }
}

fn is_integer_text(v: &str) -> bool {
    let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn is_number_text(v: &str) -> bool {
    v.trim().parse::<f64>().is_ok() && !v.contains(['i', 'I', 'n', 'N'])
}

/// Checks one value against its property schema; `Err` carries the message for this key.
pub(crate) fn check_prop(path: &str, schema: &Value, value: &str) -> Result<(), String> {
    let ty = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string");
    match ty {
        "boolean" if value != "0" && value != "1" => {
            return Err(format!("type check ('boolean') failed - got '{value}'"));
        }
        "integer" if !is_integer_text(value) => {
            return Err(format!("type check ('integer') failed - got '{value}'"));
        }
        "number" if !is_number_text(value) => {
            return Err(format!("type check ('number') failed - got '{value}'"));
        }
        _ => {}
    }
    // JSONSchema.pm's check_prop order after the type: format, pattern, maxLength, minLength, maximum,
    // minimum, enum; the first failing check is the parameter's one error (`vmid=42` is a format error).
    match schema.get("format") {
        Some(Value::Object(fmt)) => {
            if let Err(e) = parse_property_string(fmt, value, path) {
                return Err(format!("invalid format - {e}"));
            }
        }
        Some(Value::String(name)) => {
            if let Err(e) = check_format(name, value, path) {
                return Err(format!("invalid format - {e}"));
            }
        }
        _ => {}
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str)
        && !matches_pattern(p, value)
    {
        return Err("value does not match the regex pattern".to_string());
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && value.len() as u64 > max
    {
        return Err(format!("value may only be {max} characters long"));
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && (value.len() as u64) < min
    {
        return Err(format!("value must be at least {min} characters long"));
    }
    if is_number_text(value)
        && let Ok(n) = value.trim().parse::<f64>()
    {
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(format!(
                "value must have a maximum value of {}",
                number_text(schema.get("maximum"))
            ));
        }
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(format!(
                "value must have a minimum value of {}",
                number_text(schema.get("minimum"))
            ));
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum") {
        let names: Vec<String> = options
            .iter()
            .map(|o| match o {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        if !names.iter().any(|n| n == value) {
            return Err(format!(
                "value '{value}' does not have a value in the enumeration '{}'",
                names.join(", ")
            ));
        }
    }
    Ok(())
}

fn number_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Checks a parsed object (`name -> value`) against a properties map, collecting errors keyed `path.name`.
fn check_object(
    path: &str,
    props: &Map<String, Value>,
    values: &BTreeMap<String, String>,
) -> Errors {
    let mut errors = Errors::new();
    let key_path = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    for (k, v) in values {
        match find_property(props, k) {
            None => {
                errors.insert(key_path(k), NOT_IN_SCHEMA.to_string());
            }
            Some(s) => {
                if s.get("alias").is_some() {
                    continue;
                }
                if s.get("type").and_then(Value::as_str) == Some("array") {
                    // JSONSchema.pm `check_prop` on an array: each item against `items`, keyed `key[i]`.
                    if let Some(items) = s.get("items") {
                        for (i, item) in v.split(ARRAY_SEPARATOR).enumerate() {
                            let item_path = format!("{}[{i}]", key_path(k));
                            if let Err(e) = check_prop(&item_path, items, item) {
                                errors.insert(item_path, e);
                            }
                        }
                    }
                    continue;
                }
                if let Err(e) = check_prop(&key_path(k), s, v) {
                    errors.insert(key_path(k), e);
                }
            }
        }
    }
    for (k, s) in props {
        if k.ends_with("[n]") || s.get("alias").is_some() || is_optional(s) {
            continue;
        }
        if !values.contains_key(k) && !errors.contains_key(&key_path(k)) {
            errors.insert(key_path(k), MISSING.to_string());
        }
    }
    for (k, s) in props {
        if let Some(req) = s.get("requires").and_then(Value::as_str)
            && values.contains_key(k)
            && !values.contains_key(req)
        {
            // pve-common `check_object` since 9.0.8 (commit 0f0e791, "clarify error on missing property
            // dependency"); PVE 9.2 ships 9.2.x.
            errors.insert(
                key_path(req),
                format!("missing property required by '{}'", key_path(k)),
            );
        }
    }
    errors
}

/// PVE's `parse_property_string`: splits `a,b=c`, resolves the default key and aliases, then checks every sub-key.
/// On failure the returned text is what follows "invalid format - ".
pub(crate) fn parse_property_string(
    format: &Map<String, Value>,
    data: &str,
    path: &str,
) -> Result<BTreeMap<String, String>, String> {
    let mut res: BTreeMap<String, String> = BTreeMap::new();
    let mut default_used = false;
    for part in data.split(',') {
        if part.trim().is_empty() {
            continue;
        }
        if let Some((k, v)) = part.split_once('=')
            && !k.is_empty()
            && !v.is_empty()
        {
            let mut key = k.to_string();
            if res.contains_key(&key) {
                return Err(format!(
                    "duplicate key in comma-separated list property: {key}\n"
                ));
            }
            let mut schema = format.get(&key);
            if let Some(alias) = schema.and_then(|s| s.get("alias")).and_then(Value::as_str) {
                if let Some(key_alias) = schema
                    .and_then(|s| s.get("keyAlias"))
                    .and_then(Value::as_str)
                {
                    if res.contains_key(key_alias) {
                        return Err(format!("key alias '{key_alias}' is already defined\n"));
                    }
                    res.insert(key_alias.to_string(), key.clone());
                }
                key = alias.to_string();
                schema = format.get(&key);
            }
            let mut value = v.to_string();
            if schema.and_then(|s| s.get("type")).and_then(Value::as_str) == Some("boolean")
                && let Some(b) = parse_boolean(&value)
            {
                value = b.to_string();
            }
            res.insert(key, value);
        } else if !part.contains('=') {
            if default_used {
                let dk = default_key(format).unwrap_or_default();
                return Err(format!(
                    "duplicate key in comma-separated list property: {dk}\n"
                ));
            }
            let Some(dk) = default_key(format) else {
                return Err(
                    "value without key, but schema does not define a default key\n".to_string(),
                );
            };
            if res.contains_key(&dk) {
                return Err(format!(
                    "duplicate key in comma-separated list property: {dk}\n"
                ));
            }
            default_used = true;
            let mut value = part.to_string();
            if format
                .get(&dk)
                .and_then(|s| s.get("type"))
                .and_then(Value::as_str)
                == Some("boolean")
                && let Some(b) = parse_boolean(&value)
            {
                value = b.to_string();
            }
            res.insert(dk, value);
        } else {
            return Err("missing key in comma-separated list property\n".to_string());
        }
    }
    let errors = check_object(path, format, &res);
    if !errors.is_empty() {
        let mut msg = "format error\n".to_string();
        for (k, v) in &errors {
            msg.push_str(&format!("{k}: {v}\n"));
        }
        return Err(msg);
    }
    Ok(res)
}

/// Verifies a value against a named format: a property string (`formats::named_dict`) is
/// parsed and its keys checked here, then its own rules (`formats::check_parsed`); any other
/// is `formats::check_named`'s. `Err` is the validator's die text.
pub(crate) fn check_format(name: &str, value: &str, path: &str) -> Result<(), String> {
    match formats::named_dict(name) {
        Some(dict) => formats::check_parsed(name, &parse_property_string(dict, value, path)?),
        None => formats::check_named(name, value),
    }
}

/// Parses a value of a named property-string format (`pve-qm-hostpci`, ...); `None` when it
/// does not parse.
pub(crate) fn parse_named(name: &str, value: &str, path: &str) -> Option<BTreeMap<String, String>> {
    parse_property_string(formats::named_dict(name)?, value, path).ok()
}

/// Joins the values of an `array` parameter in the merged parameter map (`Req::list` splits them again): a
/// character no form value PVE takes can hold.
pub(crate) const ARRAY_SEPARATOR: char = '\0';

/// True for an `array` parameter (PVE's RESTHandler makes a single value a one-item array, repeated keys many).
fn is_array(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("array")
}

/// True when the property's format is a `-list` format whose repeated values are joined with `,`.
fn is_list_format(schema: &Value) -> bool {
    schema
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| f.ends_with("-list"))
}

/// Validates request parameters (path parameters included) for one endpoint, as RESTHandler + JSONSchema do.
/// Returns the merged parameter map: repeated keys are joined with `,` for `-list` formats and with
/// [`ARRAY_SEPARATOR`] for `array` parameters, the last value wins otherwise.
pub(crate) fn validate(
    method: &str,
    template: &str,
    params: &[(String, String)],
) -> Result<BTreeMap<String, String>, Errors> {
    static EMPTY: OnceLock<Map<String, Value>> = OnceLock::new();
    let props = parameters(method, template).unwrap_or_else(|| EMPTY.get_or_init(Map::new));
    let mut merged: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in params {
        let list = find_property(props, k).is_some_and(is_list_format);
        let array = find_property(props, k).is_some_and(is_array);
        match merged.get_mut(k) {
            Some(existing) if list => {
                existing.push(',');
                existing.push_str(v);
            }
            Some(existing) if array => {
                existing.push(ARRAY_SEPARATOR);
                existing.push_str(v);
            }
            _ => {
                merged.insert(k.clone(), v.clone());
            }
        }
    }
    let errors = check_object("", props, &merged);
    if errors.is_empty() {
        Ok(merged)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_string_errors_are_nested() {
        let props = parameters("POST", "/nodes/{node}/qemu").unwrap();
        let net = find_property(props, "net0").unwrap();
        let err = check_prop("net0", net, "virtio,bridge=vmbr0,tag=0").unwrap_err();
        assert_eq!(
            err,
            "invalid format - format error\nnet0.tag: value must have a minimum value of 1\n"
        );
        let virtio = find_property(props, "virtio0").unwrap();
        let err = check_prop("virtio0", virtio, "local-lvm:8,ssd=1").unwrap_err();
        assert!(
            err.contains("virtio0.ssd: property is not defined in schema"),
            "{err}"
        );
        assert!(find_property(props, "scsi31").is_none());
        assert!(find_property(props, "scsi30").is_some());
    }
}
