#include "strategy/runtime/world.h"

namespace tower {

LocalWorld* LocalWorld::Get() {
  static LocalWorld* const world = new LocalWorld();
  return world;
}

}  // namespace tower
