//! Inner-thought providers of the service: the offline rules (`none`) live in the
//! actors crate; the OpenAI-compatible provider (`openai`) lives here because it talks
//! to a server.

pub mod openai;

use std::sync::Arc;

use mnemos_actors::arbiter::Arbiter;
use mnemos_actors::thought::{InnerThought, RuleThought};

use crate::config::InnerThoughtSettings;

/// The provider the settings ask for, and the arbiter when `inner_thought.arbiter` is on.
pub fn from_settings(
    settings: &InnerThoughtSettings,
) -> (Arc<dyn InnerThought>, Option<Arc<dyn Arbiter>>) {
    match settings.provider.as_str() {
        "openai" => {
            let client = Arc::new(openai::OpenAiThought::new(settings));
            let arbiter: Option<Arc<dyn Arbiter>> = settings.arbiter.then(|| client.clone() as _);
            (client, arbiter)
        }
        _ => (Arc::new(RuleThought), None),
    }
}
