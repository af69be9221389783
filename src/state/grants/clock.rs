//! The wall clock and durations: the I/O the pure core leaves to callers.

use std::time::{SystemTime, UNIX_EPOCH};

use super::GrantError;
use crate::policy::UtcTime;

/// The current time, UTC, to the second. The policy core never reads the
/// clock; this is where callers get the `now` they pass in.
pub fn now_utc() -> UtcTime {
    let secs = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        // A clock set before 1970: count backwards rather than panic.
        Err(e) => i64::try_from(e.duration().as_secs()).map_or(i64::MIN, |s| -s),
    };
    UtcTime(secs)
}

/// How long "allow and remember" remembers when the person names no
/// duration, on every surface (the terminal, elicitation, `approvals allow
/// --remember`): a day. Forever is an explicit answer.
pub const DEFAULT_REMEMBER_SECS: i64 = 24 * 60 * 60;

/// The answer to "remember for how long?": empty is the default
/// ([`DEFAULT_REMEMBER_SECS`]), `forever` is until revoked (`None`),
/// anything else a duration as [`parse_duration`] reads it.
pub fn remember_for(answer: &str) -> Result<Option<i64>, GrantError> {
    match answer.trim() {
        "" => Ok(Some(DEFAULT_REMEMBER_SECS)),
        "forever" => Ok(None),
        d => parse_duration(d).map(Some),
    }
}

/// Parses a positive duration of one unit — `30s`, `10m`, `2h`, `7d` — into
/// seconds. No spaces, signs, fractions or combined units.
pub fn parse_duration(s: &str) -> Result<i64, GrantError> {
    crate::util::text::duration_secs(s).map_err(|why| GrantError::BadDuration {
        value: s.to_string(),
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), 30);
        assert_eq!(parse_duration("10m").unwrap(), 600);
        assert_eq!(parse_duration("2h").unwrap(), 7200);
        assert_eq!(parse_duration("7d").unwrap(), 604800);
        for (bad, why) in [
            ("", "it is empty"),
            ("10", "expected a number followed by `s`, `m`, `h` or `d`"),
            ("m", "expected a number followed by `s`, `m`, `h` or `d`"),
            ("-5m", "expected a number followed by `s`, `m`, `h` or `d`"),
            ("1.5h", "expected a number followed by `s`, `m`, `h` or `d`"),
            (" 5m", "expected a number followed by `s`, `m`, `h` or `d`"),
            ("5w", "expected a number followed by `s`, `m`, `h` or `d`"),
            ("5é", "expected a number followed by `s`, `m`, `h` or `d`"),
            ("0s", "it must be greater than zero"),
            ("99999999999999999999s", "it is too large"),
            ("999999999999999999d", "it is too large"),
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("malformed duration `{bad}`: {why}")
            );
            assert!(err.is_invalid_input());
        }
    }

    #[test]
    fn the_clock_is_after_2024() {
        assert!(now_utc() > UtcTime::parse("2024-01-01T00:00:00Z").unwrap());
    }
}
