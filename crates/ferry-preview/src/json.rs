//! Preview of JSON: the top-level shape, then the head of the text.

use std::fmt;
use std::io::{self, BufReader, Read, Seek};

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::limits::{JSON_KEYS_SHOWN_MAX, JSON_PARSE_MAX_BYTES, TEXT_HEAD_READ_MAX_BYTES};
use crate::read::{decode_head, read_head};
use crate::wording::{count, grouped, human_bytes, shown_name};

/// The top level of a JSON document; nested values are skipped, not stored,
/// so memory stays flat however large the document.
#[derive(Debug, PartialEq)]
enum JsonShape {
    Object {
        /// The first `JSON_KEYS_SHOWN_MAX` keys, in document order.
        keys: Vec<String>,
        key_count: u64,
    },
    Array {
        len: u64,
    },
    Scalar(&'static str),
}

/// The preview of a JSON file.
pub(crate) fn preview_json<R: Read + Seek>(reader: &mut R, size: u64) -> io::Result<String> {
    let mut out = if size > JSON_PARSE_MAX_BYTES {
        format!(
            "JSON text over {}; its structure was not checked.",
            human_bytes(JSON_PARSE_MAX_BYTES)
        )
    } else {
        reader.rewind()?;
        let limited = BufReader::new(reader.by_ref().take(JSON_PARSE_MAX_BYTES));
        match serde_json::from_reader::<_, JsonShape>(limited) {
            Ok(shape) => describe(&shape),
            Err(error) if error.is_io() => return Err(error.into()),
            Err(error) => format!("Not valid JSON: {error}."),
        }
    };
    let head = read_head(reader, TEXT_HEAD_READ_MAX_BYTES)?;
    let decoded = decode_head(&head, size <= TEXT_HEAD_READ_MAX_BYTES);
    out.push_str("\n\n");
    out.push_str(&decoded.text);
    Ok(out)
}

fn describe(shape: &JsonShape) -> String {
    match shape {
        JsonShape::Object { keys, key_count } => {
            let mut out = format!("JSON object with {}", count(*key_count, "key", "keys"));
            if !keys.is_empty() {
                let listed: Vec<String> = keys.iter().map(|key| format!("\"{key}\"")).collect();
                out.push_str(&format!(": {}", listed.join(", ")));
                let unlisted = key_count.saturating_sub(keys.len() as u64);
                if unlisted > 0 {
                    out.push_str(&format!(" … and {} more", grouped(unlisted)));
                }
            }
            out.push('.');
            out
        }
        JsonShape::Array { len } => {
            format!("JSON array with {}.", count(*len, "element", "elements"))
        }
        JsonShape::Scalar(kind) => format!("JSON document holding a single {kind}."),
    }
}

impl<'de> Deserialize<'de> for JsonShape {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ShapeVisitor)
    }
}

struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = JsonShape;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonShape, A::Error> {
        let mut keys = Vec::new();
        let mut key_count = 0u64;
        while let Some(key) = map.next_key::<String>()? {
            key_count += 1;
            if keys.len() < JSON_KEYS_SHOWN_MAX {
                keys.push(shown_name(&key));
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(JsonShape::Object { keys, key_count })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonShape, A::Error> {
        let mut len = 0u64;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            len += 1;
        }
        Ok(JsonShape::Array { len })
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("number"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("string"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("null"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> JsonShape {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn reads_top_level_shapes() {
        assert_eq!(
            shape(r#"{"a": {"deep": [1, 2]}, "b": null}"#),
            JsonShape::Object {
                keys: vec!["a".into(), "b".into()],
                key_count: 2
            }
        );
        assert_eq!(shape("[1, [2, 3], {}]"), JsonShape::Array { len: 3 });
        assert_eq!(shape("\"x\""), JsonShape::Scalar("string"));
        assert_eq!(shape("null"), JsonShape::Scalar("null"));
    }

    #[test]
    fn lists_a_bounded_number_of_keys() {
        let keys: Vec<String> = (0..JSON_KEYS_SHOWN_MAX + 5)
            .map(|i| format!("\"k{i}\": {i}"))
            .collect();
        let parsed = shape(&format!("{{{}}}", keys.join(",")));
        let text = describe(&parsed);
        assert!(text.contains("… and 5 more"), "{text}");
    }

    #[test]
    fn deep_nesting_below_the_top_level_is_skipped_without_recursion() {
        let deep = format!("[{}{}]", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(shape(&deep), JsonShape::Array { len: 1 });
    }
}
