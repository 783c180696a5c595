// Included by metrics/weighted_l2.cu through -I: a change here rebuilds that
// artifact and the module, nothing else.
#pragma once
#ifndef WL2_SCALE
#define WL2_SCALE 1
#endif
#define CONSUMER_SCALE ((float)(WL2_SCALE))
