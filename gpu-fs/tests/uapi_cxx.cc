/* The LightIOV headers as a C++ client sees them (gpu-fs's CUDA code, any C++ tool): this unit
 * only has to compile, with g++ -std=c++17 -Wall -Wextra -Werror (make -C gpu-fs test). */
#include <cstddef>

#include "lightiov/nvme.h"
#include "lightiov/uapi.h"
#include "lightiov/check.h"
#include "lightiov/nvmeq.h"

/* The sizes uapi.h pins hold in C++ too (its own asserts ran above, as static_assert). */
static_assert(sizeof(struct lio_qp_create) == 112, "lio_qp_create as C++ sees it");
static_assert(offsetof(struct lio_msg_hdr, label) == 16, "lio_msg_hdr as C++ sees it");
static_assert(sizeof(struct nvme_sqe) == 64, "nvme_sqe as C++ sees it");
static_assert(LIO_MDTS_BYTES == 128u << 10, "largest transfer");

/* uapi.h's declarations have C linkage: a C++ function of the same name and type would clash. */
int uapi_cxx_abi_version(void);
int uapi_cxx_abi_version(void)
{
	struct lio_identify id = {};

	id.abi_version = LIO_ABI_VERSION;
	return (int)id.abi_version + (int)sizeof(struct lio_msg_reply);
}
