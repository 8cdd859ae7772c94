//! Maintenance windows: whether one is open at a time, and when the next opens. Pure: the
//! time is given.

use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

use crate::api::MaintenanceWindow;

/// A window at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Open until this time.
    Open(Zoned),
    /// Closed; the next opens at this time.
    Closed(Zoned),
}

/// A window read: its schedule, length and zone.
#[derive(Debug, Clone)]
pub struct Window {
    cron: Cron,
    length: jiff::SignedDuration,
    zone: TimeZone,
}

impl Window {
    /// Reads `window`; an error names the field (under `at`, for example
    /// `spec.maintenanceWindow`) and what to write instead.
    pub fn read(window: &MaintenanceWindow, at: &str) -> Result<Window, String> {
        // Five fields, as a Kubernetes CronJob reads them: no seconds, no years.
        let parser = CronParser::builder().seconds(Seconds::Disallowed).year(Year::Disallowed).build();
        let cron = parser.parse(&window.schedule).map_err(|e| {
            format!(
                "{at}.schedule {:?} is not a cron schedule ({e}): give five fields, minute hour day-of-month month day-of-week, for example \"0 2 * * 6\"",
                window.schedule
            )
        })?;
        let length = parse_duration(&window.duration).map_err(|e| {
            format!("{at}.duration {:?} is not a Go duration ({e}): for example 4h", window.duration)
        })?;
        let length = jiff::SignedDuration::try_from(length)
            .map_err(|e| format!("{at}.duration {:?}: {e}", window.duration))?;
        if length.is_zero() {
            return Err(format!("{at}.duration is 0: a window must stay open a while, for example 4h"));
        }
        let zone = match window.time_zone.as_deref() {
            None | Some("") => TimeZone::UTC,
            Some(name) => TimeZone::get(name).map_err(|e| {
                format!("{at}.timeZone {name:?} is not a time zone this operator knows ({e}): give an IANA name such as Europe/Berlin")
            })?,
        };
        Ok(Window { cron, length, zone })
    }

    /// The window at `now`.
    pub fn at(&self, now: Timestamp) -> Result<State, String> {
        let here = now.to_zoned(self.zone.clone());
        // The latest opening at or before now: if it is still open, so is the window. A window
        // longer than the time between openings is open throughout.
        let last = self.cron.find_previous_occurrence(&here, true).ok();
        if let Some(opened) = last {
            let closes = opened.checked_add(self.length).map_err(|e| e.to_string())?;
            if closes > here {
                return Ok(State::Open(closes));
            }
        }
        let opens = self
            .cron
            .find_next_occurrence(&here, false)
            .map_err(|e| format!("the schedule {} never opens a window: {e}", self.cron.as_str()))?;
        Ok(State::Closed(opens))
    }
}

/// A Go duration (`10m`, `1h30m`, `90s`).
pub(super) fn parse_duration(text: &str) -> Result<Duration, String> {
    let parsed: kube::core::Duration = text.parse().map_err(|e| format!("{text}: {e}"))?;
    Ok(parsed.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(schedule: &str, duration: &str, zone: Option<&str>) -> Window {
        let spec = MaintenanceWindow {
            schedule: schedule.into(),
            duration: duration.into(),
            time_zone: zone.map(String::from),
        };
        Window::read(&spec, "spec.maintenanceWindow").unwrap()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_saturday_night_window_is_open_from_two_to_six() {
        let w = window("0 2 * * 6", "4h", None);
        // 2026-11-28 is a Saturday.
        let State::Open(closes) = w.at(at("2026-11-28T03:15:00Z")).unwrap() else { panic!("open") };
        assert_eq!(closes.timestamp(), at("2026-11-28T06:00:00Z"));
        let State::Closed(opens) = w.at(at("2026-11-28T06:00:00Z")).unwrap() else { panic!("closed") };
        assert_eq!(opens.timestamp(), at("2026-12-05T02:00:00Z"));
        let State::Closed(opens) = w.at(at("2026-11-26T12:00:00Z")).unwrap() else { panic!("closed") };
        assert_eq!(opens.timestamp(), at("2026-11-28T02:00:00Z"));
        assert!(matches!(w.at(at("2026-11-28T02:00:00Z")).unwrap(), State::Open(_)));
    }

    #[test]
    fn the_schedule_is_read_in_its_time_zone() {
        let w = window("0 2 * * *", "1h", Some("Europe/Berlin"));
        // 02:00 in Berlin is 01:00 UTC in winter.
        assert!(matches!(w.at(at("2026-11-26T01:30:00Z")).unwrap(), State::Open(_)));
        assert!(matches!(w.at(at("2026-11-26T02:30:00Z")).unwrap(), State::Closed(_)));
    }

    #[test]
    fn a_window_as_long_as_its_period_is_always_open() {
        let w = window("* * * * *", "1m", None);
        assert!(matches!(w.at(at("2026-11-26T01:30:17Z")).unwrap(), State::Open(_)));
        let w = window("@hourly", "2h", None);
        assert!(matches!(w.at(at("2026-11-26T01:59:59Z")).unwrap(), State::Open(_)));
    }

    #[test]
    fn bad_windows_name_their_field_and_what_to_write() {
        let read = |schedule: &str, duration: &str, zone: Option<&str>| {
            let spec = MaintenanceWindow {
                schedule: schedule.into(),
                duration: duration.into(),
                time_zone: zone.map(String::from),
            };
            Window::read(&spec, "spec.upgradePolicy.maintenanceWindow").unwrap_err()
        };
        let six = read("0 0 2 * * 6", "4h", None);
        assert!(six.starts_with("spec.upgradePolicy.maintenanceWindow.schedule \"0 0 2 * * 6\""), "{six}");
        assert!(read("0 2 * * 6", "4 hours", None).contains("maintenanceWindow.duration \"4 hours\""));
        assert!(read("0 2 * * 6", "0s", None).contains("duration is 0"));
        assert!(read("0 2 * * 6", "4h", Some("Mars/Olympus")).contains("timeZone \"Mars/Olympus\""));
    }
}
