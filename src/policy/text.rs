//! Text a guest controls, bounded before it is kept.
//!
//! A path, an argv, a host name or a question comes from the guest, and a
//! record (the audit, a run report) keeps it. Kept whole, one turn's
//! records could grow to gigabytes (1,000 refusals of a 1 MiB path). So
//! every such string is kept to at most [`MAX_KEPT`] bytes and, when cut,
//! says how long it was and its sha256: the record still identifies the
//! exact input without holding it.

use std::borrow::Cow;

use super::snapshot::sha256_hex;

/// Bytes of one guest-controlled string a record keeps.
pub const MAX_KEPT: usize = 4_096;

/// `text` whole when it is at most [`MAX_KEPT`] bytes; else its first
/// bytes (cut at a character boundary) followed by
/// `… [cut: N bytes in all, sha256 HEX]`, at most [`MAX_KEPT`] bytes in
/// all: bounding a bounded string changes nothing.
pub fn bounded(text: &str) -> Cow<'_, str> {
    if text.len() <= MAX_KEPT {
        return Cow::Borrowed(text);
    }
    let marker = format!(
        "… [cut: {} bytes in all, sha256 {}]",
        text.len(),
        sha256_hex(text.as_bytes())
    );
    let mut end = MAX_KEPT - marker.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}{marker}", &text[..end]))
}

/// Every string of `value` bounded (see [`bounded`]), in place.
pub fn bound_strings(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => {
            if let Cow::Owned(cut) = bounded(s) {
                *s = cut;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(bound_strings),
        serde_json::Value::Object(map) => map.values_mut().for_each(bound_strings),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_string_keeps_its_head_its_length_and_its_digest() {
        assert!(matches!(bounded("short"), Cow::Borrowed("short")));
        let long = "é".repeat(3_000); // 6,000 bytes
        let cut = bounded(&long);
        assert!(cut.starts_with(&"é".repeat(1_900)));
        assert!(cut.len() <= MAX_KEPT);
        assert!(matches!(bounded(&cut), Cow::Borrowed(_)));
        assert!(cut.ends_with(&format!(
            "… [cut: 6000 bytes in all, sha256 {}]",
            sha256_hex(long.as_bytes())
        )));
        let mut v = serde_json::json!({"a": [long.clone(), 1], "b": "x"});
        bound_strings(&mut v);
        assert_eq!(v["a"][0].as_str(), Some(cut.as_ref()));
        assert_eq!(v["b"], "x");
    }
}
