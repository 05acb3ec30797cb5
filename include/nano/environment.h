#pragma once
// A process environment as a value: the one type every layer of nano passes environments in
// (the planner's recipe, the launcher's rank environments, the runtime's context, the tests).
#include <map>
#include <string>

namespace nano {

/// Variable name -> value.
using Environment = std::map<std::string, std::string>;

/// This process's environment (`environ`).
Environment current_environment();

}  // namespace nano
