//! Timestamps: lenient RFC 3339 parsing of every legacy variant, one
//! fixed-width storage form that sorts as text, and the legacy output form.

use chrono::{DateTime, SecondsFormat, Utc};
use std::fmt;

/// An instant in UTC with nanosecond precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(DateTime<Utc>);

impl Timestamp {
    /// The current time.
    pub fn now() -> Self {
        Timestamp(Utc::now())
    }

    /// Wraps a chrono time, held to the years 0000-9999 that the storage
    /// form can write (a time outside them becomes the nearest end).
    pub fn from_datetime(time: DateTime<Utc>) -> Self {
        let year = chrono::Datelike::year(&time);
        if year < 0 {
            Timestamp(DateTime::<Utc>::from_timestamp(-62_167_219_200, 0).unwrap_or(time))
        } else if year > 9999 {
            Timestamp(DateTime::<Utc>::from_timestamp(253_402_300_799, 999_999_999).unwrap_or(time))
        } else {
            Timestamp(time)
        }
    }

    /// The chrono time.
    pub fn datetime(&self) -> DateTime<Utc> {
        self.0
    }

    /// Parses RFC 3339 with any fraction width and any offset. Years outside
    /// 0000..=9999 are refused: they cannot be stored in the fixed-width form.
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Some(leap) = parse_stored_leap(text) {
            return Ok(leap);
        }
        let parsed = DateTime::parse_from_rfc3339(text.trim())
            .map_err(|e| format!("invalid timestamp {text:?}: {e}"))?;
        let utc = parsed.with_timezone(&Utc);
        // Leap seconds are inserted at 23:59:60 UTC only; chrono takes a
        // 60th second at any offset's midnight minute (`23:59:60+01:00`,
        // 22:59:60 UTC), which never happened.
        if chrono::Timelike::nanosecond(&utc) >= 1_000_000_000
            && (chrono::Timelike::hour(&utc), chrono::Timelike::minute(&utc)) != (23, 59)
        {
            return Err(format!(
                "invalid timestamp {text:?}: a leap second is 23:59:60 in UTC only"
            ));
        }
        let year = chrono::Datelike::year(&utc);
        if !(0..=9999).contains(&year) {
            return Err(format!("timestamp {text:?} is outside the years 0000-9999"));
        }
        Ok(Timestamp(utc))
    }

    /// The fixed-width storage form (`2025-11-23T19:42:53.902113845Z`).
    ///
    /// A leap second (`23:59:60.5`) is the one exception: SQLite's date
    /// functions read a 60th second as NULL, so it is stored as the last
    /// nanosecond of the 59th second followed by its own nine digits of
    /// fraction (`23:59:59.999999999500000000Z`, 39 characters). SQLite
    /// reads that as 23:59:59.999, [`Timestamp::parse`] reads it back as
    /// the leap second exactly, and it sorts after every other instant of
    /// that minute but the very last nanosecond.
    pub fn to_storage(&self) -> String {
        use chrono::{Datelike, Timelike};
        let t = &self.0;
        let (second, nanos) = match t.nanosecond() {
            // A leap second: chrono keeps it as nanos past 1e9.
            n if n >= 1_000_000_000 => {
                let mut stored =
                    Timestamp(t.with_nanosecond(999_999_999).unwrap_or(*t)).to_storage();
                stored.pop();
                stored.push_str(&format!("{:09}Z", n - 1_000_000_000));
                return stored;
            }
            n => (t.second(), n),
        };
        let year = match u32::try_from(t.year()) {
            Ok(year) if year <= 9999 => year,
            // Outside the fixed width (only a saturated far-off instant, as
            // parsing refuses such years): the same fields, wider.
            _ => {
                return format!(
                    "{:04}-{:02}-{:02}T{:02}:{:02}:{second:02}.{nanos:09}Z",
                    t.year(),
                    t.month(),
                    t.day(),
                    t.hour(),
                    t.minute()
                )
            }
        };
        // Digit by digit: this runs for every timestamp written (three or
        // more per imported item), and `format!` with widths was 4% of an
        // import's writing thread.
        let mut out = String::with_capacity(30);
        for (value, width, after) in [
            (year, 4, '-'),
            (t.month(), 2, '-'),
            (t.day(), 2, 'T'),
            (t.hour(), 2, ':'),
            (t.minute(), 2, ':'),
            (second, 2, '.'),
            (nanos, 9, 'Z'),
        ] {
            let mut divisor = 10u32.pow(width - 1);
            while divisor > 0 {
                out.push(char::from(b'0' + (value / divisor % 10) as u8));
                divisor /= 10;
            }
            out.push(after);
        }
        out
    }

    /// The form the legacy writer produced: RFC 3339 in UTC with `Z` and a
    /// fraction of 0, 3, 6 or 9 digits.
    pub fn to_legacy(&self) -> String {
        self.0.to_rfc3339_opts(SecondsFormat::AutoSi, true)
    }

    /// This instant minus a number of whole seconds (saturating).
    pub fn minus_seconds(&self, seconds: i64) -> Self {
        let delta = chrono::TimeDelta::try_seconds(seconds).unwrap_or(chrono::TimeDelta::MAX);
        Timestamp(
            self.0
                .checked_sub_signed(delta)
                .unwrap_or(DateTime::<Utc>::MIN_UTC),
        )
    }

    /// This instant moved into the years 0000-9999, the range whose stored
    /// form sorts as text in time order: a computed instant outside it
    /// (`now + 3000000d`) would be stored wider and sort wrongly.
    pub fn clamped_to_storage_range(self) -> Self {
        use chrono::TimeZone;
        let lowest = Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).single();
        let highest = Utc
            .with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
            .single()
            .and_then(|t| t.checked_add_signed(chrono::TimeDelta::nanoseconds(999_999_999)));
        match (lowest, highest) {
            (Some(low), _) if self.0 < low => Timestamp(low),
            (_, Some(high)) if self.0 > high => Timestamp(high),
            _ => self,
        }
    }

    /// This instant plus a number of milliseconds (saturating).
    pub fn plus_millis(&self, millis: i64) -> Self {
        let delta = chrono::TimeDelta::try_milliseconds(millis).unwrap_or(chrono::TimeDelta::MAX);
        Timestamp(
            self.0
                .checked_add_signed(delta)
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
        )
    }
}

/// The storage form of a leap second (see [`Timestamp::to_storage`]), or
/// `None` for any other text.
fn parse_stored_leap(text: &str) -> Option<Timestamp> {
    let bytes = text.as_bytes();
    if bytes.len() != 39
        || !text.is_char_boundary(29)
        || &text[17..29] != "59.999999999"
        || !text.ends_with('Z')
        || !bytes[29..38].iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    let leap_nanos: u32 = text[29..38].parse().ok()?;
    let minute = DateTime::parse_from_rfc3339(&format!("{}00Z", &text[..17])).ok()?;
    let time = minute
        .naive_utc()
        .date()
        .and_hms_nano_opt(
            chrono::Timelike::hour(&minute),
            chrono::Timelike::minute(&minute),
            59,
            1_000_000_000 + leap_nanos,
        )?
        .and_utc();
    Some(Timestamp(time))
}

impl From<DateTime<Utc>> for Timestamp {
    /// See [`Timestamp::from_datetime`].
    fn from(time: DateTime<Utc>) -> Self {
        Timestamp::from_datetime(time)
    }
}

impl From<std::time::SystemTime> for Timestamp {
    fn from(time: std::time::SystemTime) -> Self {
        Timestamp::from_datetime(DateTime::<Utc>::from(time))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_legacy())
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_legacy())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chrono_times_convert_and_stay_storable() {
        let now = Utc::now();
        assert_eq!(Timestamp::from(now).datetime(), now);
        let far = DateTime::<Utc>::MAX_UTC;
        assert_eq!(
            Timestamp::from(far).to_storage(),
            "9999-12-31T23:59:59.999999999Z"
        );
        let early = DateTime::<Utc>::MIN_UTC;
        assert_eq!(
            Timestamp::from(early).to_storage(),
            "0000-01-01T00:00:00.000000000Z"
        );
        let system = std::time::UNIX_EPOCH + std::time::Duration::from_secs(86_400);
        assert_eq!(
            Timestamp::from(system).to_storage(),
            "1970-01-02T00:00:00.000000000Z"
        );
    }

    #[test]
    fn every_fraction_width_and_offset_parses() {
        for (input, legacy) in [
            ("2025-11-23T19:42:53Z", "2025-11-23T19:42:53Z"),
            ("2025-11-23T19:42:53.120Z", "2025-11-23T19:42:53.120Z"),
            ("2025-11-23T19:42:53.123456Z", "2025-11-23T19:42:53.123456Z"),
            (
                "2025-11-23T19:42:53.902113845Z",
                "2025-11-23T19:42:53.902113845Z",
            ),
            ("2025-11-23T12:42:53-07:00", "2025-11-23T19:42:53Z"),
        ] {
            let ts = Timestamp::parse(input).unwrap();
            assert_eq!(ts.to_legacy(), legacy, "{input}");
            assert_eq!(ts.to_storage().len(), 30, "{input}");
            assert_eq!(
                ts.to_storage(),
                ts.datetime().format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string()
            );
        }
    }

    #[test]
    fn storage_form_matches_chrono_for_any_instant() {
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let max = DateTime::parse_from_rfc3339("9999-12-31T23:59:59.999999999Z")
            .unwrap()
            .timestamp();
        for _ in 0..20_000 {
            let seconds = (next() % (max as u64 + 62_135_596_800)) as i64 - 62_135_596_800;
            let nanos = (next() % 1_000_000_000) as u32;
            let ts = Timestamp(DateTime::from_timestamp(seconds, nanos).unwrap());
            assert_eq!(
                ts.to_storage(),
                ts.datetime().format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string()
            );
        }
        // A leap second, and the far-off instant saturating arithmetic gives.
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
            .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_500_000_000))
            .unwrap()
            .and_utc();
        assert_eq!(
            Timestamp(leap).to_storage(),
            "2016-12-31T23:59:59.999999999500000000Z"
        );
        assert_eq!(
            Timestamp::parse(&Timestamp(leap).to_storage()),
            Ok(Timestamp(leap))
        );
        assert_eq!(Timestamp(leap).to_legacy(), "2016-12-31T23:59:60.500Z");
        assert!(Timestamp::parse("2016-12-31T23:59:60.5Z").is_ok());
        assert!(Timestamp::parse("2016-12-31T23:59:60+00:00").is_ok());
        assert!(Timestamp::parse("2017-01-01T00:59:60+01:00").is_ok());
        assert!(Timestamp::parse("2016-12-31T23:59:60+01:00").is_err());
        assert!(Timestamp::parse("2016-12-31T12:59:60Z").is_err());
        let far = Timestamp::now().plus_millis(i64::MAX).to_storage();
        assert!(
            far.len() == 32 && far.ends_with("-12-31T23:59:59.999999999Z"),
            "{far}"
        );
    }

    #[test]
    fn storage_form_sorts_in_instant_order() {
        let a = Timestamp::parse("2025-11-23T19:42:53Z").unwrap();
        let b = Timestamp::parse("2025-11-23T19:42:53.5Z").unwrap();
        let c = Timestamp::parse("2025-11-23T19:42:54-00:00").unwrap();
        assert!(a < b && b < c);
        assert!(a.to_storage() < b.to_storage() && b.to_storage() < c.to_storage());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [
            "",
            "yesterday",
            "2025-13-01T00:00:00Z",
            "+10000-01-01T00:00:00Z",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
    }
}
