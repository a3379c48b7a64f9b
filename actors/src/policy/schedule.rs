//! When a scheduled job fires next (pure): a cron expression with a seconds field,
//! evaluated in a time zone.
//!
//! tokio-cron-scheduler's own time-zone jobs capture the UTC offset once, so a job
//! created in winter fires an hour off after a daylight-saving change. Instead the
//! BackgroundCognition actor asks [`Schedule::next_after`] for each next firing and
//! arms a one-shot job for it; the zone rules are applied at every step, so "03:00
//! local" stays 03:00 local across DST changes. A local time skipped by a spring-forward
//! gap fires at the first valid instant after it; a local time repeated by a fall-back
//! overlap fires once (at its first occurrence).

use std::fmt;

use chrono::{DateTime, Local, Utc};
use croner::parser::{CronParser, Seconds};
use croner::Cron;

use crate::error::{MemoryError, MemoryResult};

/// A time zone for schedules: the machine's local zone, or an IANA zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleZone {
    /// The machine's local zone (as the OS reports it, including its DST rules).
    Local,
    /// A named zone such as `Europe/Paris` (or `UTC`).
    Named(chrono_tz::Tz),
}

impl ScheduleZone {
    /// Parse `local` or an IANA zone name; `key` names the config key in the error.
    pub fn parse(key: &str, raw: &str) -> MemoryResult<Self> {
        let raw = raw.trim();
        if raw.is_empty() || raw.eq_ignore_ascii_case("local") {
            return Ok(ScheduleZone::Local);
        }
        raw.parse::<chrono_tz::Tz>()
            .map(ScheduleZone::Named)
            .map_err(|_| {
                MemoryError::invalid(
                    key,
                    format!("{key} = {raw:?} is not \"local\" or an IANA time zone such as \"Europe/Paris\" or \"UTC\""),
                )
            })
    }
}

impl fmt::Display for ScheduleZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleZone::Local => f.write_str("local"),
            ScheduleZone::Named(zone) => write!(f, "{}", zone.name()),
        }
    }
}

/// A parsed cron expression (seconds first) bound to a zone.
#[derive(Clone)]
pub struct Schedule {
    /// The expression as configured, for logs and errors.
    pub expression: String,
    /// The parsed pattern.
    cron: Cron,
    /// The zone the pattern's wall-clock fields are read in.
    pub zone: ScheduleZone,
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Schedule({:?} in {})", self.expression, self.zone)
    }
}

impl Schedule {
    /// Parse a six- or seven-field cron expression (seconds first); `key` names the config key in the error.
    pub fn parse(key: &str, expression: &str, zone: ScheduleZone) -> MemoryResult<Self> {
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .dom_and_dow(true)
            .build()
            .parse(expression.trim())
            .map_err(|e| {
                MemoryError::invalid(
                    key,
                    format!("{key} = {expression:?} is not a cron schedule with a seconds field (e.g. \"0 */30 * * * *\" or \"0 0 3 * * *\"): {e}"),
                )
            })?;
        Ok(Self {
            expression: expression.trim().to_string(),
            cron,
            zone,
        })
    }

    /// The first firing strictly after `after`, or None when the pattern never matches
    /// again. Firings are whole seconds, so every process computes the same instant
    /// for the same firing (it is the lease slot).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        use chrono::SubsecRound;
        let after = after.trunc_subsecs(0);
        match self.zone {
            ScheduleZone::Local => self
                .cron
                .find_next_occurrence(&after.with_timezone(&Local), false)
                .ok()
                .map(|t| t.with_timezone(&Utc)),
            ScheduleZone::Named(zone) => self
                .cron
                .find_next_occurrence(&after.with_timezone(&zone), false)
                .ok()
                .map(|t| t.with_timezone(&Utc)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn paris() -> ScheduleZone {
        ScheduleZone::parse("archival.timezone", "Europe/Paris").unwrap()
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    #[test]
    fn three_am_stays_local_across_spring_forward() {
        let schedule = Schedule::parse("archival.schedule", "0 0 3 * * *", paris()).unwrap();
        // Winter: 03:00 CET = 02:00 UTC.
        let first = schedule.next_after(utc(2026, 3, 27, 12, 0)).unwrap();
        assert_eq!(first, utc(2026, 3, 28, 2, 0));
        // 29 March 2026 clocks jump 02:00 → 03:00; 03:00 CEST exists = 01:00 UTC.
        let second = schedule.next_after(first).unwrap();
        assert_eq!(second, utc(2026, 3, 29, 1, 0));
        let third = schedule.next_after(second).unwrap();
        assert_eq!(third, utc(2026, 3, 30, 1, 0));
    }

    #[test]
    fn three_am_stays_local_across_fall_back() {
        let schedule = Schedule::parse("archival.schedule", "0 0 3 * * *", paris()).unwrap();
        let before = schedule.next_after(utc(2026, 10, 24, 12, 0)).unwrap();
        // Summer: 03:00 CEST = 01:00 UTC; 25 October 02:00–03:00 repeats, 03:00 is after it (CET).
        assert_eq!(before, utc(2026, 10, 25, 2, 0));
        assert_eq!(
            schedule.next_after(before).unwrap(),
            utc(2026, 10, 26, 2, 0)
        );
    }

    #[test]
    fn a_time_inside_the_repeated_hour_fires_once() {
        let schedule = Schedule::parse("s", "0 30 2 * * *", paris()).unwrap();
        let first = schedule.next_after(utc(2026, 10, 24, 12, 0)).unwrap();
        // 02:30 happens twice on 25 October (00:30 and 01:30 UTC): fire at the first only.
        assert_eq!(first, utc(2026, 10, 25, 0, 30));
        assert_eq!(
            schedule.next_after(first).unwrap(),
            utc(2026, 10, 26, 1, 30)
        );
    }

    #[test]
    fn a_time_inside_the_skipped_hour_still_fires_that_day() {
        let schedule = Schedule::parse("s", "0 30 2 * * *", paris()).unwrap();
        let fired = schedule.next_after(utc(2026, 3, 28, 12, 0)).unwrap();
        // 02:30 does not exist on 29 March: it fires on that day, not a day later.
        assert_eq!(fired.date_naive(), utc(2026, 3, 29, 0, 0).date_naive());
        assert!(fired <= utc(2026, 3, 29, 1, 30));
    }

    #[test]
    fn every_thirty_minutes_in_utc() {
        let zone = ScheduleZone::parse("z", "UTC").unwrap();
        let schedule = Schedule::parse("s", "0 */30 * * * *", zone).unwrap();
        assert_eq!(
            schedule.next_after(utc(2026, 1, 1, 10, 0)).unwrap(),
            utc(2026, 1, 1, 10, 30)
        );
    }

    #[test]
    fn firings_are_whole_seconds_whatever_the_clock_reads() {
        let zone = ScheduleZone::parse("z", "UTC").unwrap();
        let schedule = Schedule::parse("s", "* * * * * *", zone).unwrap();
        let now = utc(2026, 1, 1, 10, 0) + chrono::Duration::nanoseconds(123_456_789);
        let next = schedule.next_after(now).unwrap();
        assert_eq!(next, utc(2026, 1, 1, 10, 0) + chrono::Duration::seconds(1));
        assert_eq!(
            schedule.next_after(next).unwrap(),
            next + chrono::Duration::seconds(1)
        );
    }

    #[test]
    fn bad_input_names_the_key() {
        let error =
            Schedule::parse("cognition.schedule", "every day", ScheduleZone::Local).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("cognition.schedule"));
        let error = ScheduleZone::parse("archival.timezone", "Mars/Olympus").unwrap_err();
        assert!(error.message.contains("IANA"), "{}", error.message);
        assert_eq!(
            ScheduleZone::parse("k", "local").unwrap(),
            ScheduleZone::Local
        );
    }
}
