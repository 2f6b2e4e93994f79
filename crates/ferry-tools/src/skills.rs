//! `skill_search`: finds a bundled skill (T-SKILL) and returns only its SKILL.md body.

use ferry_codes::Code;
use ferry_docs::skills::Skill;
use ferry_site::SiteError;
use serde_json::json;

use crate::args::{self, Query};
use crate::{ToolError, ToolOutput, Toolbox};

/// Skills named when nothing matches.
const SKILLS_LISTED_MAX: usize = 50;

pub(crate) fn skill_search(
    tools: &Toolbox,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let args: Query = args::parse("skill_search", args)?;
    args::check_short_text("skill_search", "query", &args.query)?;
    let words: Vec<String> = args
        .query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if words.is_empty() {
        return Err(ToolError::new(
            Code::InvalidArguments,
            "query has no words to search for",
        ));
    }
    let set = tools.site().skills().map_err(|e| match e {
        SiteError::Unsafe { .. } => ToolError::new(Code::PathEscapes, e.to_string()),
        e => ToolError::new(
            Code::SkillsUnavailable,
            format!("the skills cannot be read: {e}"),
        ),
    })?;
    let best = set
        .skills
        .iter()
        .map(|skill| (score(skill, &words), skill))
        .filter(|(score, _)| *score > 0)
        .max_by(|(a, sa), (b, sb)| a.cmp(b).then_with(|| sb.name.cmp(&sa.name)));
    match best {
        Some((_, skill)) => Ok(ToolOutput::text(format!(
            "Skill `{}` ({}); its files are in {}\n\n{}",
            skill.name,
            skill.description,
            skill.dir.display(),
            skill.body
        ))
        .with_structured(json!({
            "name": skill.name,
            "description": skill.description,
            "dir": skill.dir,
        }))),
        None => {
            let names: Vec<String> = set
                .skills
                .iter()
                .take(SKILLS_LISTED_MAX)
                .map(|s| format!("{} ({})", s.name, s.description))
                .collect();
            Err(ToolError::new(
                Code::NoSkill,
                if names.is_empty() {
                    "no skills are installed".to_owned()
                } else {
                    format!(
                        "no skill matches `{}`; the skills are: {}",
                        args.query,
                        names.join("; ")
                    )
                },
            ))
        }
    }
}

/// Query words found in the name count three times those in the description.
fn score(skill: &Skill, words: &[String]) -> usize {
    let name = skill.name.to_lowercase();
    let description = skill.description.to_lowercase();
    words
        .iter()
        .map(|w| {
            3 * usize::from(name.contains(w.as_str()))
                + usize::from(description.contains(w.as_str()))
        })
        .sum()
}
