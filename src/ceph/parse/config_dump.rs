//! `ceph config dump --format json`: the centralized config database, an array of
//! `{"section","name","value","level","can_update_at_runtime","mask"}` (Mimic and later).

use serde_json::Value;

use super::json::parse_value;
use super::ParseError;

#[derive(Debug, Clone, PartialEq)]
pub struct ConfigEntry {
    /// `global`, `osd`, `osd.3`, `mgr`, ...
    pub section: String,
    pub name: String,
    pub value: String,
    /// e.g. `class:hdd` or `host:node1`; empty when the entry applies to the whole section.
    pub mask: String,
}

impl ConfigEntry {
    pub fn new(section: &str, name: &str, value: &str, mask: &str) -> Self {
        Self {
            section: section.into(),
            name: name.into(),
            value: value.into(),
            mask: mask.into(),
        }
    }
}

pub fn parse(out: &[u8]) -> Result<Vec<ConfigEntry>, ParseError> {
    from_value(&parse_value(out)?)
}

pub fn from_value(v: &Value) -> Result<Vec<ConfigEntry>, ParseError> {
    let items = v.as_array().ok_or_else(|| ParseError::Shape {
        path: "(top level)".into(),
        expected: "expected an array of config entries".into(),
    })?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let field = |name: &str, required: bool| -> Result<String, ParseError> {
                match item.get(name) {
                    Some(Value::String(s)) => Ok(s.clone()),
                    // Values of numeric options may come as numbers in some releases.
                    Some(Value::Number(n)) => Ok(n.to_string()),
                    Some(Value::Bool(b)) => Ok(b.to_string()),
                    None | Some(Value::Null) if !required => Ok(String::new()),
                    other => Err(ParseError::Shape {
                        path: format!("[{i}].{name}"),
                        expected: format!(
                            "expected a string, found {}",
                            other.map_or("nothing", super::json::kind)
                        ),
                    }),
                }
            };
            Ok(ConfigEntry {
                section: field("section", true)?,
                name: field("name", true)?,
                value: field("value", true)?,
                mask: field("mask", false)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> Vec<u8> {
        std::fs::read(format!(
            "{}/tests/fixtures/{rel}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap_or_default()
    }

    #[test]
    fn real_dumps_parse() {
        let entries = parse(&fixture("healthy-idle/ceph_config_dump.json")).unwrap();
        assert!(entries.iter().any(|e| e.section == "mgr"
            && e.name == "mgr/prometheus/server_port"
            && e.value == "19283"));
        let rebalance = parse(&fixture("rebalance/ceph_config_dump.json")).unwrap();
        assert!(
            rebalance
                .iter()
                .any(|e| e.section == "osd" && e.name == "osd_async_recovery_min_cost"),
            "{rebalance:?}"
        );
    }

    #[test]
    fn hostile_inputs_are_errors() {
        assert_eq!(parse(b""), Err(ParseError::Empty));
        assert!(parse(b"{\"section\":1}").is_err());
        assert!(parse(b"[{\"section\":\"osd\",\"name\":\"x\"}]")
            .unwrap_err()
            .to_string()
            .contains("[0].value"));
        assert!(parse(b"[{\"section\":\"osd\",\"name\":\"x\",\"value\":\"1\"").is_err());
    }
}
