#include "core/shell.h"

#include <nlohmann/json.hpp>

#include <nano/error.h>

namespace nano {

Shell parse_shell(const std::string& text) {
  if (text == "bash" || text == "zsh" || text == "sh" || text == "dash" || text == "posix") return Shell::kPosix;
  if (text == "fish") return Shell::kFish;
  throw UsageError("unknown shell \"" + text + "\" (choose bash, zsh, sh or fish)");
}

std::string quote_for_shell(const std::string& value, Shell shell) {
  std::string out = "'";
  for (char ch : value) {
    if (ch == '\'') {
      // POSIX single quotes cannot hold a quote: close, emit an escaped one, reopen.
      out += shell == Shell::kPosix ? "'\\''" : "\\'";
    } else if (ch == '\\' && shell == Shell::kFish) {
      out += "\\\\";  // fish interprets \\ and \' inside single quotes
    } else {
      out += ch;
    }
  }
  return out + "'";
}

namespace {

std::string set_line(const std::string& name, const std::string& value, Shell shell) {
  if (shell == Shell::kFish) return "set -gx " + name + " " + quote_for_shell(value, shell) + "\n";
  return "export " + name + "=" + quote_for_shell(value, shell) + "\n";
}

std::string unset_line(const std::string& name, Shell shell) {
  return shell == Shell::kFish ? "set -e " + name + "\n" : "unset " + name + "\n";
}

}  // namespace

std::string render_exports(const Recipe& recipe, Shell shell, bool explain) {
  std::string out;
  for (const EnvSetting& s : recipe.set) {
    if (explain) out += "# " + s.name + ": " + s.reason + "\n";
    out += set_line(s.name, s.value, shell);
  }
  return out;
}

std::string render_unset(const Recipe& recipe, const Environment& current, Shell shell) {
  const Environment undone = unapply_recipe(recipe, current);
  std::string out;
  for (const EnvSetting& s : recipe.set) {
    auto it = undone.find(s.name);
    if (it == undone.end())
      out += unset_line(s.name, shell);
    else
      out += set_line(s.name, it->second, shell);
  }
  return out;
}

std::string render_json(const Recipe& recipe) {
  nlohmann::ordered_json object = nlohmann::ordered_json::object();
  for (const EnvSetting& s : recipe.set) object[s.name] = s.value;
  return object.dump(2) + "\n";
}

}  // namespace nano
