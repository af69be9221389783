//! UTC timestamps as the grant store writes them: `YYYY-MM-DDTHH:MM:SSZ`.
//!
//! Pure arithmetic only; the clock is read by callers outside the core and
//! passed in. The fixed-width form sorts lexicographically in time order,
//! which the SQLite queries rely on.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Seconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UtcTime(pub i64);

/// A timestamp not in the `YYYY-MM-DDTHH:MM:SSZ` form; holds the text given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed utc time `{0}` (expected `YYYY-MM-DDTHH:MM:SSZ`)")]
pub struct BadTime(pub String);

// Howard Hinnant's days-from-civil and civil-from-days.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

impl UtcTime {
    /// This time `secs` seconds later (earlier if negative), saturating.
    pub fn plus_seconds(self, secs: i64) -> UtcTime {
        UtcTime(self.0.saturating_add(secs))
    }

    /// Parses the fixed `YYYY-MM-DDTHH:MM:SSZ` form.
    pub fn parse(s: &str) -> Result<UtcTime, BadTime> {
        let bad = || BadTime(s.to_string());
        let b = s.as_bytes();
        if b.len() != 20
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
            || b[19] != b'Z'
        {
            return Err(bad());
        }
        let num = |r: std::ops::Range<usize>| -> Result<i64, BadTime> {
            let part = &s[r];
            if !part.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            part.parse::<i64>().map_err(|_| bad())
        };
        let (y, mo, d, h, mi, se) = (
            num(0..4)?,
            num(5..7)?,
            num(8..10)?,
            num(11..13)?,
            num(14..16)?,
            num(17..19)?,
        );
        let month_days = [
            31,
            if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 {
                29
            } else {
                28
            },
            31,
            30,
            31,
            30,
            31,
            31,
            30,
            31,
            30,
            31,
        ];
        if !(1..=12).contains(&mo)
            || d < 1
            || d > month_days[(mo - 1) as usize]
            || h > 23
            || mi > 59
            || se > 59
        {
            return Err(bad());
        }
        Ok(UtcTime(
            days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se,
        ))
    }
}

impl UtcTime {
    /// `YYYY-MM-DDTHH:MM:SSZ` as bytes, without the formatting machinery
    /// (every turn's id and records use it); `None` outside years 0–9999.
    pub fn to_ascii(self) -> Option<[u8; 20]> {
        let days = self.0.div_euclid(86400);
        let secs = self.0.rem_euclid(86400);
        let (y, m, d) = civil_from_days(days);
        if !(0..=9999).contains(&y) {
            return None;
        }
        let mut out = *b"0000-00-00T00:00:00Z";
        let mut put = |at: usize, width: usize, mut v: i64| {
            for i in (0..width).rev() {
                out[at + i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(0, 4, y);
        put(5, 2, m);
        put(8, 2, d);
        put(11, 2, secs / 3600);
        put(14, 2, secs / 60 % 60);
        put(17, 2, secs % 60);
        Some(out)
    }
}

impl fmt::Display for UtcTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(ascii) = self.to_ascii() {
            // The bytes are ASCII digits and separators only.
            return f.write_str(std::str::from_utf8(&ascii).map_err(|_| fmt::Error)?);
        }
        let days = self.0.div_euclid(86400);
        let secs = self.0.rem_euclid(86400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    }
}

impl Serialize for UtcTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.to_ascii() {
            Some(ascii) => match std::str::from_utf8(&ascii) {
                Ok(text) => s.serialize_str(text),
                Err(_) => s.collect_str(self),
            },
            None => s.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for UtcTime {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        UtcTime::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for (secs, text) in [
            (0, "1970-01-01T00:00:00Z"),
            (951782400, "2000-02-29T00:00:00Z"),
            (1796229852, "2026-12-02T16:44:12Z"),
        ] {
            assert_eq!(UtcTime(secs).to_string(), text);
            assert_eq!(UtcTime::parse(text), Ok(UtcTime(secs)));
        }
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-12-02 16:44:12Z",
            "2026-12-02T16:44:12",
            "x",
        ] {
            assert!(UtcTime::parse(bad).is_err(), "{bad}");
        }
    }
}
