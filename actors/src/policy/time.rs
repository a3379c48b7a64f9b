//! Time queries: resolve `today`, `last week`, `in May 2023`, `between … and …` and
//! friends to a half-open range `[start, end)` over `occurred_at`, relative to a given
//! `now` (pure; weeks start on Monday; all in UTC).

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};

/// A half-open time range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    /// Inclusive start.
    pub start: DateTime<Utc>,
    /// Exclusive end.
    pub end: DateTime<Utc>,
}

impl TimeRange {
    /// True when `at` lies in the range.
    pub fn contains(&self, at: DateTime<Utc>) -> bool {
        at >= self.start && at < self.end
    }
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

fn month_number(word: &str) -> Option<u32> {
    let word = word.trim_end_matches(['.', ',']);
    MONTHS
        .iter()
        .position(|m| *m == word || (word.len() >= 3 && m.starts_with(word)))
        .map(|i| i as u32 + 1)
}

fn midnight(date: NaiveDate) -> DateTime<Utc> {
    Utc.from_utc_datetime(&date.and_hms_opt(0, 0, 0).expect("midnight exists"))
}

fn month_start(year: i32, month: u32) -> Option<NaiveDate> {
    NaiveDate::from_ymd_opt(year, month, 1)
}

fn next_month(date: NaiveDate) -> Option<NaiveDate> {
    if date.month() == 12 {
        NaiveDate::from_ymd_opt(date.year() + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(date.year(), date.month() + 1, 1)
    }
}

fn add_months(date: NaiveDate, months: i32) -> Option<NaiveDate> {
    let total = date.year() * 12 + date.month() as i32 - 1 + months;
    let (year, month) = (total.div_euclid(12), total.rem_euclid(12) as u32 + 1);
    let last_day = next_month(NaiveDate::from_ymd_opt(year, month, 1)?)?
        .pred_opt()?
        .day();
    NaiveDate::from_ymd_opt(year, month, date.day().min(last_day))
}

/// A date or month named in text: `2023-05-08`, `8 May 2023`, `May 8, 2023`, `May 2023`, `2023`.
/// Returns the range the expression covers (a day, a month or a year).
pub fn parse_date_span(text: &str) -> Option<TimeRange> {
    let text = text.trim().trim_end_matches(['.', '?', '!']).to_lowercase();
    if let Ok(date) = NaiveDate::parse_from_str(&text, "%Y-%m-%d") {
        return Some(TimeRange {
            start: midnight(date),
            end: midnight(date.succ_opt()?),
        });
    }
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let number = |w: &str| {
        w.trim_end_matches(|c: char| c.is_alphabetic() && !w.chars().all(char::is_alphabetic))
            .parse::<u32>()
            .ok()
    };
    let year_of = |w: &str| w.parse::<i32>().ok().filter(|y| (1000..=9999).contains(y));
    match words.as_slice() {
        [year] => {
            let year = year_of(year)?;
            Some(TimeRange {
                start: midnight(NaiveDate::from_ymd_opt(year, 1, 1)?),
                end: midnight(NaiveDate::from_ymd_opt(year + 1, 1, 1)?),
            })
        }
        [month, year] => {
            let start = month_start(year_of(year)?, month_number(month)?)?;
            Some(TimeRange {
                start: midnight(start),
                end: midnight(next_month(start)?),
            })
        }
        [a, b, year] => {
            let year = year_of(year)?;
            let (day, month) = match (number(a), month_number(b)) {
                (Some(day), Some(month)) => (day, month),
                _ => (number(b)?, month_number(a)?),
            };
            let date = NaiveDate::from_ymd_opt(year, month, day)?;
            Some(TimeRange {
                start: midnight(date),
                end: midnight(date.succ_opt()?),
            })
        }
        _ => None,
    }
}

/// Resolve a time query relative to `now`. The error says which forms are understood.
pub fn parse_time_query(query: &str, now: DateTime<Utc>) -> Result<TimeRange, String> {
    let text = query.trim().to_lowercase();
    let today = now.date_naive();
    let day = |date: NaiveDate| midnight(date);
    let week_start = today - Duration::days(i64::from(today.weekday().num_days_from_monday()));
    let range = |start: DateTime<Utc>, end: DateTime<Utc>| Some(TimeRange { start, end });
    let words: Vec<&str> = text.split_whitespace().collect();
    let resolved = match words.as_slice() {
        ["today"] => range(day(today), day(today + Duration::days(1))),
        ["yesterday"] => range(day(today - Duration::days(1)), day(today)),
        ["this", "week"] => range(day(week_start), day(week_start + Duration::days(7))),
        ["last", "week"] => range(day(week_start - Duration::days(7)), day(week_start)),
        ["this", "month"] => {
            let start = month_start(today.year(), today.month()).ok_or("bad date")?;
            range(day(start), day(next_month(start).ok_or("bad date")?))
        }
        ["last", "month"] => {
            let this = month_start(today.year(), today.month()).ok_or("bad date")?;
            range(day(add_months(this, -1).ok_or("bad date")?), day(this))
        }
        ["this", "year"] => parse_date_span(&today.year().to_string()),
        ["last", "year"] => parse_date_span(&(today.year() - 1).to_string()),
        ["last" | "past", count, unit] | ["in", "the", "last" | "past", count, unit] => {
            let count: i64 = count
                .parse()
                .map_err(|_| format!("{count:?} is not a number in {query:?}"))?;
            if count <= 0 || count > 100_000 {
                return Err(format!(
                    "the count in {query:?} must be between 1 and 100000"
                ));
            }
            let start = match unit.trim_end_matches('s') {
                "minute" => now - Duration::minutes(count),
                "hour" => now - Duration::hours(count),
                "day" => now - Duration::days(count),
                "week" => now - Duration::weeks(count),
                "month" => {
                    let date = add_months(today, -(count as i32)).ok_or("date out of range")?;
                    Utc.from_utc_datetime(&date.and_time(now.time()))
                }
                "year" => {
                    let date = add_months(today, -(count as i32) * 12).ok_or("date out of range")?;
                    Utc.from_utc_datetime(&date.and_time(now.time()))
                }
                other => return Err(format!("unknown unit {other:?} in {query:?}; use minutes, hours, days, weeks, months or years")),
            };
            range(start, now + Duration::seconds(1))
        }
        ["since", rest @ ..] => {
            let span = parse_date_span(&rest.join(" "))
                .ok_or_else(|| format!("cannot read the date in {query:?}"))?;
            range(span.start, now.max(span.start) + Duration::seconds(1))
        }
        ["before", rest @ ..] => {
            let span = parse_date_span(&rest.join(" "))
                .ok_or_else(|| format!("cannot read the date in {query:?}"))?;
            range(DateTime::<Utc>::MIN_UTC, span.start)
        }
        ["in" | "on" | "during", rest @ ..] => parse_date_span(&rest.join(" ")),
        ["between", rest @ ..] => {
            let joined = rest.join(" ");
            let (from, to) = joined
                .split_once(" and ")
                .ok_or_else(|| format!("{query:?} needs the form \"between <date> and <date>\""))?;
            let from =
                parse_date_span(from).ok_or_else(|| format!("cannot read the date {from:?}"))?;
            let to = parse_date_span(to).ok_or_else(|| format!("cannot read the date {to:?}"))?;
            if to.end <= from.start {
                return Err(format!(
                    "in {query:?} the second date comes before the first"
                ));
            }
            range(from.start, to.end)
        }
        _ => parse_date_span(&text),
    };
    resolved.ok_or_else(|| {
        format!(
            "cannot understand time_query {query:?}; use today, yesterday, this/last week|month|year, last N days|weeks|months, \
             past N hours, since <date>, in <Month> <year>, between <date> and <date>, or a date like 2023-05-08"
        )
    })
}

/// Words a time expression inside free text starts with.
const TIME_LEADS: &[&str] = &[
    "yesterday",
    "today",
    "this",
    "last",
    "past",
    "in",
    "on",
    "since",
    "between",
    "during",
    "before",
];

/// A time expression found inside a query, and the query without it.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundTime {
    /// The resolved range.
    pub range: TimeRange,
    /// The words that expressed it.
    pub phrase: String,
    /// The query with the phrase removed (the rest of the question).
    pub rest: String,
}

/// Find the longest time expression inside `query` ("what did we discuss last week",
/// "notes from May 2023", "3 days ago"), resolved against `now`.
pub fn find_time_expression(query: &str, now: DateTime<Utc>) -> Option<FoundTime> {
    let words: Vec<&str> = query.split_whitespace().collect();
    let clean = |w: &str| {
        w.trim_matches(|c: char| !c.is_alphanumeric() && c != '-')
            .to_lowercase()
    };
    let cleaned: Vec<String> = words.iter().map(|w| clean(w)).collect();
    let mut best: Option<(usize, usize, TimeRange)> = None;
    // A bare number after a lead word is a year only in a year's company ("in 2023",
    // "before 2020"), never a port or a count ("on 8080", "before 1000 users").
    let bare_number =
        |span: &[String]| span.len() == 2 && span[1].chars().all(|c| c.is_ascii_digit());
    let plausible_year = |lead: &str, word: &str| {
        matches!(lead, "in" | "since" | "before" | "during")
            && word.len() == 4
            && word
                .parse::<i32>()
                .is_ok_and(|year| (1900..=now.year() + 1).contains(&year))
    };
    for start in 0..cleaned.len() {
        // Nine words: "between 8 May 2023 and 10 May 2023".
        for end in (start + 1..=(start + 9).min(cleaned.len())).rev() {
            let span = &cleaned[start..end];
            let phrase = span.join(" ");
            let range = if TIME_LEADS.contains(&span[0].as_str()) {
                if bare_number(span) && !plausible_year(&span[0], &span[1]) {
                    None
                } else {
                    parse_time_query(&phrase, now)
                        .ok()
                        .or_else(|| month_without_year(span, now))
                }
            } else if span.len() == 3 && span[2] == "ago" {
                ago(span, now)
            } else if (2..=3).contains(&span.len())
                && span.iter().any(|w| month_number(w).is_some())
                && span[span.len() - 1].len() == 4
            {
                // "May 2023", "8 May 2023", "May 8, 2023".
                parse_date_span(&phrase)
            } else {
                None
            };
            if let Some(range) = range {
                if best.as_ref().is_none_or(|(s, e, _)| end - start > e - s) {
                    best = Some((start, end, range));
                }
                break;
            }
        }
    }
    let (start, end, range) = best?;
    let rest: Vec<&str> = words[..start]
        .iter()
        .chain(&words[end..])
        .copied()
        .collect();
    Some(FoundTime {
        range,
        phrase: words[start..end].join(" "),
        rest: rest.join(" "),
    })
}

/// "in May" / "during June": the latest such month that began before `now`.
fn month_without_year(span: &[String], now: DateTime<Utc>) -> Option<TimeRange> {
    let [lead, month] = span else { return None };
    if !matches!(lead.as_str(), "in" | "during") || month.len() < 3 {
        return None;
    }
    let number = month_number(month)?;
    let today = now.date_naive();
    let year = if number <= today.month() {
        today.year()
    } else {
        today.year() - 1
    };
    let start = month_start(year, number)?;
    Some(TimeRange {
        start: midnight(start),
        end: midnight(next_month(start)?),
    })
}

/// "3 days ago", "two weeks ago" (digits only): the day, week or month that long ago.
fn ago(span: &[String], now: DateTime<Utc>) -> Option<TimeRange> {
    let count: i64 = span[0].parse().ok().filter(|n| (1..=10_000).contains(n))?;
    let today = now.date_naive();
    match span[1].trim_end_matches('s') {
        "day" => {
            let day = today - Duration::days(count);
            Some(TimeRange {
                start: midnight(day),
                end: midnight(day.succ_opt()?),
            })
        }
        "week" => {
            let monday = today
                - Duration::days(i64::from(today.weekday().num_days_from_monday()))
                - Duration::weeks(count);
            Some(TimeRange {
                start: midnight(monday),
                end: midnight(monday + Duration::days(7)),
            })
        }
        "month" => {
            let start = add_months(month_start(today.year(), today.month())?, -(count as i32))?;
            Some(TimeRange {
                start: midnight(start),
                end: midnight(next_month(start)?),
            })
        }
        "year" => parse_date_span(&(today.year() - count as i32).to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn check(query: &str, now: &str, start: &str, end: &str) {
        let range = parse_time_query(query, at(now)).unwrap();
        assert_eq!(
            (range.start, range.end),
            (at(start), at(end)),
            "{query} at {now}"
        );
    }

    #[test]
    fn relative_days_and_weeks() {
        check(
            "today",
            "2024-03-01T10:00:00Z",
            "2024-03-01T00:00:00Z",
            "2024-03-02T00:00:00Z",
        );
        check(
            "yesterday",
            "2024-03-01T10:00:00Z",
            "2024-02-29T00:00:00Z",
            "2024-03-01T00:00:00Z",
        );
        // 2024-03-04 is a Monday: "last week" is the whole previous Monday..Sunday.
        check(
            "last week",
            "2024-03-04T08:00:00Z",
            "2024-02-26T00:00:00Z",
            "2024-03-04T00:00:00Z",
        );
        check(
            "this week",
            "2024-03-10T23:00:00Z",
            "2024-03-04T00:00:00Z",
            "2024-03-11T00:00:00Z",
        );
        check(
            "past 3 hours",
            "2024-03-01T10:00:00Z",
            "2024-03-01T07:00:00Z",
            "2024-03-01T10:00:01Z",
        );
        check(
            "last 2 days",
            "2024-03-01T10:00:00Z",
            "2024-02-28T10:00:00Z",
            "2024-03-01T10:00:01Z",
        );
    }

    #[test]
    fn months_handle_boundaries_and_leap_years() {
        check(
            "last month",
            "2024-03-31T12:00:00Z",
            "2024-02-01T00:00:00Z",
            "2024-03-01T00:00:00Z",
        );
        check(
            "last month",
            "2024-01-15T12:00:00Z",
            "2023-12-01T00:00:00Z",
            "2024-01-01T00:00:00Z",
        );
        check(
            "last 1 month",
            "2024-03-31T12:00:00Z",
            "2024-02-29T12:00:00Z",
            "2024-03-31T12:00:01Z",
        );
        check(
            "in February 2024",
            "2030-01-01T00:00:00Z",
            "2024-02-01T00:00:00Z",
            "2024-03-01T00:00:00Z",
        );
        check(
            "in May 2023",
            "2030-01-01T00:00:00Z",
            "2023-05-01T00:00:00Z",
            "2023-06-01T00:00:00Z",
        );
        check(
            "in dec 2023",
            "2030-01-01T00:00:00Z",
            "2023-12-01T00:00:00Z",
            "2024-01-01T00:00:00Z",
        );
    }

    #[test]
    fn absolute_forms() {
        check(
            "since 2023-05-08",
            "2023-06-01T00:00:00Z",
            "2023-05-08T00:00:00Z",
            "2023-06-01T00:00:01Z",
        );
        check(
            "between 8 May 2023 and 10 May 2023",
            "2030-01-01T00:00:00Z",
            "2023-05-08T00:00:00Z",
            "2023-05-11T00:00:00Z",
        );
        check(
            "on May 8, 2023",
            "2030-01-01T00:00:00Z",
            "2023-05-08T00:00:00Z",
            "2023-05-09T00:00:00Z",
        );
        check(
            "2023",
            "2030-01-01T00:00:00Z",
            "2023-01-01T00:00:00Z",
            "2024-01-01T00:00:00Z",
        );
    }

    #[test]
    fn nonsense_is_an_error_that_lists_the_forms() {
        let error = parse_time_query("when the moon is full", Utc::now()).unwrap_err();
        assert!(error.contains("last N days"));
        assert!(parse_time_query("between 2023-05-10 and 2023-05-01", Utc::now()).is_err());
        assert!(parse_time_query("last 0 days", Utc::now()).is_err());
        assert!(parse_time_query("last 3 fortnights", Utc::now()).is_err());
        assert!(parse_date_span("31 February 2023").is_none());
    }

    #[test]
    fn time_expressions_are_found_inside_questions() {
        let now = at("2024-03-13T12:00:00Z");
        let found =
            find_time_expression("What did we discuss last week about pricing?", now).unwrap();
        assert_eq!(found.phrase, "last week");
        assert_eq!(found.rest, "What did we discuss about pricing?");
        assert_eq!(found.range.start, at("2024-03-04T00:00:00Z"));
        let may = find_time_expression("notes from the offsite in May 2023", now).unwrap();
        assert_eq!(
            (may.range.start, may.range.end),
            (at("2023-05-01T00:00:00Z"), at("2023-06-01T00:00:00Z"))
        );
        assert_eq!(may.rest, "notes from the offsite");
        let recent_may = find_time_expression("what happened in May", now).unwrap();
        assert_eq!(
            recent_may.range.start,
            at("2023-05-01T00:00:00Z"),
            "the latest May that has begun"
        );
        let ago = find_time_expression("the bug we fixed 3 days ago", now).unwrap();
        assert_eq!(ago.range.start, at("2024-03-10T00:00:00Z"));
        assert!(find_time_expression("what is the last item in the list", now).is_none());
        assert!(find_time_expression("how do I deploy", now).is_none());
    }

    #[test]
    fn numbers_that_are_not_years_stay_in_the_question() {
        let now = at("2024-03-13T12:00:00Z");
        assert!(find_time_expression("the service on 8080 keeps crashing", now).is_none());
        assert!(find_time_expression("what did we do before 1000 users signed up", now).is_none());
        assert!(find_time_expression("the job in 3000 batches", now).is_none());
        let before = find_time_expression("what did we use before 2020", now).unwrap();
        assert_eq!(before.range.end, at("2020-01-01T00:00:00Z"));
        assert_eq!(before.rest, "what did we use");
    }

    #[test]
    fn dates_with_a_day_keep_their_day() {
        let now = at("2024-03-13T12:00:00Z");
        let day = find_time_expression("notes from 8 May 2023", now).unwrap();
        assert_eq!(
            (day.range.start, day.range.end),
            (at("2023-05-08T00:00:00Z"), at("2023-05-09T00:00:00Z"))
        );
        assert_eq!(day.rest, "notes from");
        let us = find_time_expression("what shipped on May 8, 2023?", now).unwrap();
        assert_eq!(us.range.start, at("2023-05-08T00:00:00Z"));
        assert_eq!(us.rest, "what shipped");
        let between =
            find_time_expression("what happened between 8 May 2023 and 10 May 2023", now).unwrap();
        assert_eq!(
            (between.range.start, between.range.end),
            (at("2023-05-08T00:00:00Z"), at("2023-05-11T00:00:00Z"))
        );
        assert_eq!(between.rest, "what happened");
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any time query (free text, or made of the parser's own words and numbers)
        /// either parses to a range that starts before it ends or is an error that
        /// says why; nothing panics, whatever the reference instant.
        #[test]
        fn any_time_query_parses_to_an_ordered_range_or_an_error(
            query in prop_oneof![
                any::<String>(),
                "(in|on|since|before|after|between|last|past|this|next|ago|yesterday|today|[0-9]{1,6}|May|2023|weeks?|days?|months?|years?|and|the| ){1,8}",
            ],
            seconds in -62_000_000_000i64..250_000_000_000i64,
        ) {
            let now = DateTime::<Utc>::from_timestamp(seconds, 0).unwrap_or_else(Utc::now);
            match parse_time_query(&query, now) {
                Ok(range) => prop_assert!(range.start <= range.end, "{query:?}: {range:?}"),
                Err(message) => prop_assert!(!message.is_empty()),
            }
            if let Some(found) = find_time_expression(&query, now) {
                prop_assert!(found.range.start <= found.range.end);
            }
            let _ = parse_date_span(&query);
        }
    }
}
