#pragma once
// Renders an environment recipe as text a shell evaluates (`eval "$(nano-init)"`), as JSON,
// or with the reasons behind each variable. Pure: no environment access here.
#include <string>

#include "core/recipe.h"

namespace nano {

enum class Shell { kPosix, kFish };  ///< kPosix = bash, zsh, sh, dash

/// Parses "bash|zsh|sh|dash|posix|fish"; throws UsageError naming the value.
Shell parse_shell(const std::string& text);

/// `value` quoted so `shell` reads it back unchanged, whatever characters it holds.
std::string quote_for_shell(const std::string& value, Shell shell);

/// One line per variable: `export NAME='value'` (posix) or `set -gx NAME 'value'` (fish).
/// With `explain`, each line is preceded by a `# reason` comment, so the text still evaluates.
std::string render_exports(const Recipe& recipe, Shell shell, bool explain = false);

/// What undoes `recipe` in an environment `current` where it was applied: `unset` for the
/// variables nano owns, and LD_PRELOAD rewritten without the allocator (unset when empty).
std::string render_unset(const Recipe& recipe, const Environment& current, Shell shell);

/// A JSON object mapping each variable name to its string value.
std::string render_json(const Recipe& recipe);

}  // namespace nano
