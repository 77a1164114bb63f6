//! Numbers in text and their precision: what `bench report --check` compares a figure in
//! a run link with.
//!
//! A quoted number stands for the interval its digits round from: "1.52" for
//! [1.515, 1.525), "14" for [13.5, 14.5), "70,252" for [70,251.5, 70,252.5). It matches a
//! run when some number in the run's data files falls in that interval.

/// A number as written: its value and the number of decimals it was written with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quoted {
    /// The value (thousands separators dropped).
    pub value: f64,
    /// Digits after the decimal point.
    pub decimals: u32,
}

impl Quoted {
    /// Whether `value` rounds to this number at its precision: it lies in
    /// [self - half an ulp, self + half an ulp) of the last quoted digit.
    pub fn matches(&self, value: f64) -> bool {
        let half = 0.5 * 10f64.powi(-(self.decimals as i32));
        // A hair of slack for binary floating point: 1.525 written in JSON is
        // 1.52499999..., which must not match "1.53"'s lower bound by accident the other
        // way, so the slack is far below any printed digit.
        let eps = half * 1e-9;
        value >= self.value - half - eps && value < self.value + half - eps
    }
}

/// The numbers in `text`, in order. A number starts at a digit that does not follow a
/// letter, digit, `_` or `.` (so the `99` of `p99` and the `2` of `x2` are not numbers);
/// `,` followed by exactly three digits is a thousands separator; a decimal point must
/// be followed by a digit; an exponent (`e+04`) is read where one follows.
pub fn scan(text: &str) -> Vec<Quoted> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !b.is_ascii_digit() {
            i += 1;
            continue;
        }
        let after_word = i > 0 && {
            let p = bytes[i - 1];
            p.is_ascii_alphanumeric()
                || p == b'_'
                || p == b'.'
                || p >= 0x80 && is_letter_before(text, i)
        };
        if after_word {
            i += 1;
            continue;
        }
        let (quoted, end) = read_number(bytes, i);
        out.push(quoted);
        i = end;
        // Skip the rest of a run of digits and letters (`16x`, `2nd`).
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
    }
    out
}

/// Whether the character that ends just before byte `i` is a letter (for non-ASCII text).
fn is_letter_before(text: &str, i: usize) -> bool {
    text[..i]
        .chars()
        .next_back()
        .is_some_and(char::is_alphanumeric)
}

/// Reads the number that starts at `start` (a digit): its value, decimals and end.
fn read_number(bytes: &[u8], start: usize) -> (Quoted, usize) {
    let mut digits = String::new();
    let mut i = start;
    let mut decimals = 0u32;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_digit() {
            digits.push(b as char);
            i += 1;
        } else if b == b','
            && !digits.contains('.')
            && bytes.len() >= i + 4
            && bytes[i + 1..i + 4].iter().all(u8::is_ascii_digit)
            && !bytes.get(i + 4).is_some_and(u8::is_ascii_digit)
        {
            i += 1;
        } else if b == b'.'
            && !digits.contains('.')
            && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
        {
            digits.push('.');
            i += 1;
        } else {
            break;
        }
        if digits.contains('.') && b.is_ascii_digit() {
            decimals += 1;
        }
    }
    // An exponent: e, an optional sign, digits.
    let mut exponent = 0i32;
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        let mut j = i + 1;
        let negative = bytes.get(j) == Some(&b'-');
        if matches!(bytes.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let from = j;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            j += 1;
        }
        if j > from {
            let e: i32 = std::str::from_utf8(&bytes[from..j])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            exponent = if negative { -e } else { e };
            i = j;
        }
    }
    let mantissa: f64 = digits.parse().unwrap_or(0.0);
    let value = mantissa * 10f64.powi(exponent);
    let decimals = (decimals as i32 - exponent).max(0) as u32;
    (Quoted { value, decimals }, i)
}

/// Every number in a JSON value (numbers, and numbers written inside strings).
pub fn from_json(value: &serde_json::Value, out: &mut Vec<f64>) {
    match value {
        serde_json::Value::Number(n) => {
            if let Some(v) = n.as_f64() {
                out.push(v);
            }
        }
        serde_json::Value::String(s) => out.extend(scan(s).iter().map(|q| q.value)),
        serde_json::Value::Array(items) => items.iter().for_each(|v| from_json(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| from_json(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quoted {
        let found = scan(text);
        assert_eq!(found.len(), 1, "{text}: {found:?}");
        found[0]
    }

    #[test]
    fn precision_is_the_quoted_digits() {
        let n = q("1.52");
        assert!(n.matches(1.515) && n.matches(1.5249) && n.matches(1.52));
        assert!(!n.matches(1.525) && !n.matches(1.5149) && !n.matches(1.6));
        let n = q("14");
        assert!(n.matches(13.5) && n.matches(14.49));
        assert!(!n.matches(14.5) && !n.matches(13.49));
        let n = q("0.10");
        assert!(n.matches(0.104) && !n.matches(0.11));
    }

    #[test]
    fn thousands_separators_and_exponents() {
        assert_eq!(q("70,252 req/s").value, 70252.0);
        assert_eq!(q("1,024").decimals, 0);
        assert!(q("1.606e+04").matches(16060.0));
        let list: Vec<f64> = scan("1,2,3").iter().map(|q| q.value).collect();
        assert_eq!(list, [1.0, 2.0, 3.0]);
        let ranged: Vec<f64> = scan("1.1–1.6×").iter().map(|q| q.value).collect();
        assert_eq!(ranged, [1.1, 1.6]);
    }

    #[test]
    fn digits_inside_words_are_not_numbers() {
        assert!(scan("p99 device16 ring-run11 x2").is_empty());
        let found: Vec<f64> = scan("p99 4.56 ms, 16-core, 96%")
            .iter()
            .map(|q| q.value)
            .collect();
        assert_eq!(found, [4.56, 16.0, 96.0]);
        assert_eq!(scan("1.5x").len(), 1);
    }

    #[test]
    fn json_numbers_and_strings() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{"a": 1.5, "b": ["x 2.25 y", 3], "c": {"d": 1e3}}"#).unwrap();
        let mut out = Vec::new();
        from_json(&v, &mut out);
        out.sort_by(f64::total_cmp);
        assert_eq!(out, [1.5, 2.25, 3.0, 1000.0]);
    }
}
