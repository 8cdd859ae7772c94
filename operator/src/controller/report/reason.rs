//! Every reason a provider's conditions and events give, typed: each knows the condition it
//! belongs to, whether its event is a Warning (or whether it has an event at all), and how the
//! reconcile retries when it stops there.

use std::time::Duration;

use butler_runtime::conditions::{READY, Wanted};
use kube::runtime::events::EventType;

/// Condition types of a provider, in the order the status lists them.
pub const PREFLIGHT: &str = "PreflightCheckPassed";
pub const INSTALLED: &str = "ProviderInstalled";
pub const UPGRADED: &str = "ProviderUpgraded";
pub const PAUSED: &str = "Paused";
pub const DELETING: &str = "Deleting";
pub const ORDER: &[&str] = &[PREFLIGHT, INSTALLED, UPGRADED, PAUSED, DELETING, READY];

/// How a reconcile that stops at a reason comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// A watch wakes it when what it waits for changes; the resync is only a safety net.
    OnChange,
    /// After a fixed delay (a file or Secret that no watch covers alone).
    After(Duration),
    /// A failure: the error policy retries with a growing backoff.
    Backoff,
}

macro_rules! reasons {
    ($( $variant:ident => $condition:expr, $event:expr, $retry:expr; )*) => {
        /// A reason of a provider's condition or event.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Reason { $( $variant, )* }

        impl Reason {
            /// Every reason, for documentation and tests.
            pub const ALL: &[Reason] = &[$( Reason::$variant, )*];

            /// The CamelCase reason as conditions and events carry it.
            pub fn as_str(self) -> &'static str {
                match self { $( Reason::$variant => stringify!($variant), )* }
            }

            /// The condition type this reason belongs to.
            pub fn condition(self) -> &'static str {
                match self { $( Reason::$variant => $condition, )* }
            }

            /// The type of the event published with this reason; `None`: no event (the
            /// state is expected and passes by itself).
            pub fn event(self) -> Option<EventType> {
                match self { $( Reason::$variant => $event, )* }
            }

            /// How a reconcile that stops at this reason retries.
            pub fn retry(self) -> Retry {
                match self { $( Reason::$variant => $retry, )* }
            }
        }
    };
}

const NORMAL: Option<EventType> = Some(EventType::Normal);
const WARNING: Option<EventType> = Some(EventType::Warning);
const MINUTE: Retry = Retry::After(Duration::from_secs(60));

reasons! {
    Passed => PREFLIGHT, None, Retry::OnChange;
    DuplicateProvider => PREFLIGHT, WARNING, Retry::OnChange;
    InvalidFetchConfig => PREFLIGHT, WARNING, Retry::OnChange;
    UnknownProvider => PREFLIGHT, WARNING, Retry::OnChange;
    InvalidVersion => PREFLIGHT, WARNING, Retry::OnChange;
    WaitingForCoreProvider => PREFLIGHT, None, Retry::OnChange;
    ConfigSecretUnreadable => PREFLIGHT, WARNING, MINUTE;
    OperatorConfigUnreadable => PREFLIGHT, WARNING, MINUTE;
    DowngradeRefused => PREFLIGHT, WARNING, Retry::OnChange;
    ContractMismatch => PREFLIGHT, WARNING, Retry::OnChange;
    Installed => INSTALLED, NORMAL, Retry::OnChange;
    FetchFailed => INSTALLED, WARNING, Retry::Backoff;
    RenderFailed => INSTALLED, WARNING, Retry::OnChange;
    InvalidCustomization => INSTALLED, WARNING, Retry::OnChange;
    PolicyViolation => INSTALLED, WARNING, Retry::OnChange;
    ApplyFailed => INSTALLED, WARNING, Retry::Backoff;
    Upgraded => UPGRADED, NORMAL, Retry::OnChange;
    ContractChangeNeedsPause => UPGRADED, WARNING, Retry::OnChange;
    Paused => PAUSED, NORMAL, Retry::OnChange;
    Unpaused => PAUSED, NORMAL, Retry::OnChange;
    UnpauseRefused => PAUSED, WARNING, Retry::OnChange;
    Running => PAUSED, None, Retry::OnChange;
    DeletionBlocked => DELETING, WARNING, Retry::After(Duration::from_secs(60));
    DeletionFailed => DELETING, WARNING, Retry::Backoff;
    Ready => READY, None, Retry::OnChange;
    DeploymentsNotAvailable => READY, None, Retry::OnChange;
    NotInstalled => READY, None, Retry::OnChange;
    Deleting => READY, None, Retry::OnChange;
}

impl Reason {
    /// This reason's own condition with `status` and `message`.
    pub fn wanted(self, status: bool, message: impl Into<String>) -> Wanted {
        Wanted::new(self.condition(), status, self.as_str(), message)
    }

    /// The Ready condition, False for this reason.
    pub fn not_ready(self, message: impl Into<String>) -> Wanted {
        Wanted::new(READY, false, self.as_str(), message)
    }
}

/// Why a reconcile stops short of the end: a refusal or a failure, with what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    pub reason: Reason,
    pub message: String,
}

impl Stop {
    pub fn new(reason: Reason, message: impl Into<String>) -> Stop {
        Stop { reason, message: message.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_and_failures_are_warnings_and_expected_waits_say_nothing() {
        for reason in Reason::ALL {
            let warning = reason.event() == Some(EventType::Warning);
            let failure = matches!(reason.retry(), Retry::Backoff);
            assert!(!failure || warning, "{reason:?}: a failure is a Warning");
            assert!(ORDER.contains(&reason.condition()), "{reason:?}");
        }
        assert_eq!(Reason::OperatorConfigUnreadable.event(), Some(EventType::Warning));
        assert_eq!(Reason::WaitingForCoreProvider.event(), None);
        assert_eq!(Reason::Installed.event(), Some(EventType::Normal));
        assert_eq!(Reason::ContractChangeNeedsPause.condition(), UPGRADED);
        assert_eq!(Reason::FetchFailed.wanted(false, "m"), Wanted::new(INSTALLED, false, "FetchFailed", "m"));
        assert_eq!(Reason::Paused.not_ready("p"), Wanted::new(READY, false, "Paused", "p"));
    }
}
