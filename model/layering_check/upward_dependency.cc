// Never builds: model/ may not use strategy/ (see BUILD).
#include "strategy/mirrored_strategy.h"
