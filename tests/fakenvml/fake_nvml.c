/*
 * A fake libnvidia-ml.so.1 for tests: the unmodified pynvml loads it and calls it through ctypes, exactly
 * as it calls NVIDIA's library, so the marshalling (structs filled through pointers, versioned structs,
 * two-call process lists, error codes) runs for real. Compiled against NVIDIA's own nvml.h (PyPI
 * nvidia-nvml-dev), so every signature here is checked against the header.
 *
 * It serves the node described in the data file named by FAKE_NVML_DATA, read at nvmlInit: one line per
 * recorded call, "KEY<TAB>VALUE", where KEY is the call as gpudoctor's gateway records it
 * ("nvmlDeviceGetTemperature(gpu3,0)") and VALUE is "!CODE" for an NVML error, a string, integers
 * separated by spaces, or "name=value" fields ("total=85899345920 free=... used=0"), with records of a
 * list separated by ";". A call the file does not list answers NVML_ERROR_NOT_SUPPORTED. A symbol an
 * older driver lacks is left out of the library at link time (FunctionNotFound in pynvml).
 *
 * Structs are filled as a driver may fill them: built whole, padding bytes included, then copied out, so
 * a reader that does not mask a one-byte field (nvmlGpuFabricState_t) sees the padding.
 */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml.h"

#define MAX_DEVICES 64
#define GARBAGE 0xAB

struct nvmlDevice_st {
    unsigned int index;
};

typedef struct {
    char *key;
    char *value;
} entry_t;

static entry_t *entries;
static size_t entry_count;
static int initialised;
static struct nvmlDevice_st devices[MAX_DEVICES];

static void forget(void) {
    for (size_t i = 0; i < entry_count; i++) {
        free(entries[i].key);
    }
    free(entries);
    entries = NULL;
    entry_count = 0;
}

static int load(const char *path) {
    FILE *file = fopen(path, "r");
    if (!file) {
        return 0;
    }
    size_t capacity = 0;
    char *line = NULL;
    size_t line_size = 0;
    ssize_t length;
    while ((length = getline(&line, &line_size, file)) > 0) {
        if (line[length - 1] == '\n') {
            line[--length] = '\0';
        }
        char *tab = strchr(line, '\t');
        if (!tab) {
            continue;
        }
        if (entry_count == capacity) {
            capacity = capacity ? capacity * 2 : 256;
            entries = realloc(entries, capacity * sizeof(entry_t));
        }
        *tab = '\0';
        char *joined = malloc((size_t)length + 1); /* key, NUL, value: one allocation */
        memcpy(joined, line, (size_t)length + 1);
        entries[entry_count].key = joined;
        entries[entry_count].value = joined + (tab - line) + 1;
        entry_count++;
    }
    free(line);
    fclose(file);
    return 1;
}

static const char *lookup(const char *key) {
    for (size_t i = 0; i < entry_count; i++) {
        if (strcmp(entries[i].key, key) == 0) {
            return entries[i].value;
        }
    }
    return NULL;
}

/* The recorded answer to the call named by the format: NVML_SUCCESS with *value set, the recorded error, or
 * NOT_SUPPORTED for a call the recording does not list. */
static nvmlReturn_t answer(const char **value, const char *format, ...) {
    if (!initialised) {
        return NVML_ERROR_UNINITIALIZED;
    }
    char key[256];
    va_list args;
    va_start(args, format);
    vsnprintf(key, sizeof key, format, args);
    va_end(args);
    const char *found = lookup(key);
    if (!found) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if (found[0] == '!') {
        return (nvmlReturn_t)atoi(found + 1);
    }
    *value = found;
    return NVML_SUCCESS;
}

/* The n-th space-separated number of a value ("-1" is all ones, as NVML_VALUE_NOT_AVAILABLE). */
static unsigned long long number(const char *value, int n) {
    const char *p = value;
    for (int i = 0; i < n && p; i++) {
        p = strchr(p, ' ');
        if (p) {
            p++;
        }
    }
    return p ? (unsigned long long)strtoll(p, NULL, 0) : 0;
}

/* The text after "name=" in one record of a value (a record ends at ';'), or NULL. */
static const char *field_text(const char *record, const char *name) {
    size_t length = strlen(name);
    for (const char *p = record; p && *p && *p != ';'; p = strpbrk(p, " ;")) {
        while (*p == ' ') {
            p++;
        }
        if (strncmp(p, name, length) == 0 && p[length] == '=') {
            return p + length + 1;
        }
        if (!strpbrk(p, " ;")) {
            break;
        }
    }
    return NULL;
}

static unsigned long long field(const char *record, const char *name, unsigned long long fallback) {
    const char *text = field_text(record, name);
    return text ? (unsigned long long)strtoll(text, NULL, 0) : fallback;
}

static void field_string(const char *record, const char *name, char *out, size_t size) {
    const char *text = field_text(record, name);
    size_t length = text ? strcspn(text, " ;") : 0;
    if (length >= size) {
        length = size - 1;
    }
    memcpy(out, text ? text : "", length);
    out[length] = '\0';
}

static const char *next_item(const char *p, char separator) {
    const char *end = strchr(p, separator);
    return end ? end + 1 : p + strlen(p);
}

static unsigned int count_items(const char *value, char separator) {
    unsigned int found = 0;
    for (const char *p = value; *p; p = next_item(p, separator)) {
        found++;
    }
    return found;
}

/* NVML's two-call protocol: a buffer too small (or none) gets the count needed and INSUFFICIENT_SIZE. */
static int fits(unsigned int *capacity, unsigned int needed, const void *buffer) {
    if (*capacity < needed || (needed && !buffer)) {
        *capacity = needed;
        return 0;
    }
    return 1;
}

static nvmlReturn_t copy_string(const char *value, char *out, unsigned int length) {
    if (!out) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (strlen(value) + 1 > length) {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    strcpy(out, value);
    return NVML_SUCCESS;
}

#define DEVICE_CHECK(device)                                                                                  \
    do {                                                                                                      \
        if (!initialised) return NVML_ERROR_UNINITIALIZED;                                                    \
        if (!(device)) return NVML_ERROR_INVALID_ARGUMENT;                                                    \
    } while (0)

/* A getter of one number per device: FN(gpuN). #name keeps the unversioned name the gateway records even
 * where nvml.h maps the symbol to a versioned one. */
#define DEVICE_NUMBER(name, type)                                                                             \
    nvmlReturn_t DECLDIR name(nvmlDevice_t device, type *out) {                                               \
        const char *value;                                                                                    \
        DEVICE_CHECK(device);                                                                                 \
        nvmlReturn_t rc = answer(&value, #name "(gpu%u)", device->index);                                     \
        if (rc == NVML_SUCCESS) *out = (type)number(value, 0);                                                \
        return rc;                                                                                            \
    }

/* A getter of one number per device and argument: FN(gpuN,ARG). */
#define DEVICE_ARG_NUMBER(name, arg_type, type)                                                               \
    nvmlReturn_t DECLDIR name(nvmlDevice_t device, arg_type arg, type *out) {                                 \
        const char *value;                                                                                    \
        DEVICE_CHECK(device);                                                                                 \
        nvmlReturn_t rc = answer(&value, #name "(gpu%u,%d)", device->index, (int)arg);                        \
        if (rc == NVML_SUCCESS) *out = (type)number(value, 0);                                                \
        return rc;                                                                                            \
    }

/* A getter of two numbers per device (capability major/minor, current/pending mode): FN(gpuN). */
#define DEVICE_TWO_NUMBERS(name, type)                                                                        \
    nvmlReturn_t DECLDIR name(nvmlDevice_t device, type *first, type *second) {                               \
        const char *value;                                                                                    \
        DEVICE_CHECK(device);                                                                                 \
        nvmlReturn_t rc = answer(&value, #name "(gpu%u)", device->index);                                     \
        if (rc == NVML_SUCCESS) {                                                                             \
            *first = (type)number(value, 0);                                                                  \
            *second = (type)number(value, 1);                                                                 \
        }                                                                                                     \
        return rc;                                                                                            \
    }

/* ---- library and system ---- */

nvmlReturn_t DECLDIR nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *path = getenv("FAKE_NVML_DATA");
    forget();
    if (!path || !load(path)) {
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    initialised = 1;
    const char *value;
    nvmlReturn_t rc = answer(&value, "nvmlInit()");
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
        rc = NVML_SUCCESS;
    }
    if (rc != NVML_SUCCESS) {
        initialised = 0;
    }
    return rc;
}

nvmlReturn_t DECLDIR nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t DECLDIR nvmlShutdown(void) {
    if (!initialised) {
        return NVML_ERROR_UNINITIALIZED;
    }
    initialised = 0;
    forget();
    return NVML_SUCCESS;
}

const DECLDIR char *nvmlErrorString(nvmlReturn_t result) {
    static char text[64];
    snprintf(text, sizeof text, "fake NVML error %d", (int)result);
    return text;
}

nvmlReturn_t DECLDIR nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    const char *value;
    nvmlReturn_t rc = answer(&value, "nvmlSystemGetDriverVersion()");
    return rc == NVML_SUCCESS ? copy_string(value, version, length) : rc;
}

nvmlReturn_t DECLDIR nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    const char *value;
    nvmlReturn_t rc = answer(&value, "nvmlSystemGetNVMLVersion()");
    return rc == NVML_SUCCESS ? copy_string(value, version, length) : rc;
}

nvmlReturn_t DECLDIR nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) {
    const char *value;
    nvmlReturn_t rc = answer(&value, "nvmlSystemGetCudaDriverVersion()");
    if (rc == NVML_SUCCESS) *cudaDriverVersion = (int)number(value, 0);
    return rc;
}

nvmlReturn_t DECLDIR nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    const char *value;
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetCount()");
    if (rc == NVML_SUCCESS) *deviceCount = (unsigned int)number(value, 0);
    return rc;
}

/* Lookup can fail per GPU: NO_PERMISSION for a GPU a cgroup hides, GPU_IS_LOST for one that fell off the bus. */
nvmlReturn_t DECLDIR nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    const char *value;
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (index >= MAX_DEVICES || !device) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetHandleByIndex(%u)", index);
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED) {
        return rc;
    }
    devices[index].index = index;
    *device = &devices[index];
    return NVML_SUCCESS;
}

/* ---- identity ---- */

nvmlReturn_t DECLDIR nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetName(gpu%u)", device->index);
    return rc == NVML_SUCCESS ? copy_string(value, name, length) : rc;
}

nvmlReturn_t DECLDIR nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetUUID(gpu%u)", device->index);
    return rc == NVML_SUCCESS ? copy_string(value, uuid, length) : rc;
}

/* nvmlPciInfo_t from "name=value" fields, padding filled as a driver may leave it. */
static void fill_pci(const char *value, nvmlPciInfo_t *pci) {
    nvmlPciInfo_t info;
    memset(&info, GARBAGE, sizeof info);
    field_string(value, "busId", info.busId, sizeof info.busId);
    field_string(value, "busIdLegacy", info.busIdLegacy, sizeof info.busIdLegacy);
    info.domain = (unsigned int)field(value, "domain", 0);
    info.bus = (unsigned int)field(value, "bus", 0);
    info.device = (unsigned int)field(value, "device", 0);
    info.pciDeviceId = (unsigned int)field(value, "pciDeviceId", 0);
    info.pciSubSystemId = (unsigned int)field(value, "pciSubSystemId", 0);
    memcpy(pci, &info, sizeof info);
}

nvmlReturn_t DECLDIR nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetPciInfo_v3(gpu%u)", device->index);
    if (rc == NVML_SUCCESS) fill_pci(value, pci);
    return rc;
}

DEVICE_TWO_NUMBERS(nvmlDeviceGetCudaComputeCapability, int)

nvmlReturn_t DECLDIR nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetMemoryInfo(gpu%u)", device->index);
    if (rc == NVML_SUCCESS) {
        memory->total = field(value, "total", 0);
        memory->free = field(value, "free", 0);
        memory->used = field(value, "used", 0);
    }
    return rc;
}

/* ---- modes ---- */

DEVICE_NUMBER(nvmlDeviceGetPersistenceMode, nvmlEnableState_t)
DEVICE_NUMBER(nvmlDeviceGetComputeMode, nvmlComputeMode_t)

DEVICE_TWO_NUMBERS(nvmlDeviceGetMigMode, unsigned int)

nvmlReturn_t DECLDIR nvmlDeviceValidateInforom(nvmlDevice_t device) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceValidateInforom(gpu%u)", device->index);
    return rc;
}

/* ---- NVSwitch fabric: the original struct, and the versioned one (v2, v3) chosen by its version field ---- */

nvmlReturn_t DECLDIR nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *gpuFabricInfo) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetGpuFabricInfo(gpu%u)", device->index);
    if (rc != NVML_SUCCESS) return rc;
    nvmlGpuFabricInfo_t info;
    memset(&info, GARBAGE, sizeof info);
    memset(info.clusterUuid, 0, sizeof info.clusterUuid);
    info.status = (nvmlReturn_t)field(value, "status", 0);
    info.cliqueId = (unsigned int)field(value, "cliqueId", 0);
    info.state = (nvmlGpuFabricState_t)field(value, "state", 0);
    memcpy(gpuFabricInfo, &info, sizeof info);
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *gpuFabricInfo) {
    const char *value;
    DEVICE_CHECK(device);
    unsigned int version = gpuFabricInfo->version;
    if (version != nvmlGpuFabricInfo_v2 && version != nvmlGpuFabricInfo_v3) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetGpuFabricInfoV(gpu%u,%u)", device->index, version >> 24);
    if (rc != NVML_SUCCESS) return rc;
    nvmlGpuFabricInfo_v3_t info;
    memset(&info, GARBAGE, sizeof info);
    memset(info.clusterUuid, 0, sizeof info.clusterUuid);
    info.version = version;
    info.status = (nvmlReturn_t)field(value, "status", 0);
    info.cliqueId = (unsigned int)field(value, "cliqueId", 0);
    info.state = (nvmlGpuFabricState_t)field(value, "state", 0);
    info.healthMask = (unsigned int)field(value, "healthMask", 0);
    info.healthSummary = (unsigned char)field(value, "healthSummary", 0);
    memcpy(gpuFabricInfo, &info, version == nvmlGpuFabricInfo_v3 ? sizeof info : sizeof(nvmlGpuFabricInfo_v2_t));
    return NVML_SUCCESS;
}

/* ---- processes: NVML's two-call protocol (ask the count, then fill) ---- */

static nvmlReturn_t processes(const char *key, unsigned int index, unsigned int *count, nvmlProcessInfo_t *infos) {
    const char *value;
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = answer(&value, "%s(gpu%u)", key, index);
    if (rc != NVML_SUCCESS) return rc;
    unsigned int found = count_items(value, ';');
    if (!fits(count, found, infos)) return NVML_ERROR_INSUFFICIENT_SIZE;
    unsigned int i = 0;
    for (const char *p = value; *p; p = next_item(p, ';')) {
        infos[i].pid = (unsigned int)field(p, "pid", 0);
        infos[i].usedGpuMemory = field(p, "usedGpuMemory", 0);
        infos[i].gpuInstanceId = (unsigned int)field(p, "gpuInstanceId", 0xFFFFFFFFu);
        infos[i].computeInstanceId = (unsigned int)field(p, "computeInstanceId", 0xFFFFFFFFu);
        i++;
    }
    *count = found;
    return NVML_SUCCESS;
}

#define PROCESS_LIST(symbol, key)                                                                             \
    nvmlReturn_t DECLDIR symbol(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos) {      \
        DEVICE_CHECK(device);                                                                                 \
        return processes(key, device->index, infoCount, infos);                                               \
    }

PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses_v3, "nvmlDeviceGetComputeRunningProcesses")
PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses_v2, "nvmlDeviceGetComputeRunningProcesses_v2")
PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses_v3, "nvmlDeviceGetGraphicsRunningProcesses")
PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses_v2, "nvmlDeviceGetGraphicsRunningProcesses_v2")
PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v3, "nvmlDeviceGetMPSComputeRunningProcesses")
PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v2, "nvmlDeviceGetMPSComputeRunningProcesses_v2")

/* ---- who uses the GPU: its utilisation, and each process's samples ---- */

nvmlReturn_t DECLDIR nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetUtilizationRates(gpu%u)", device->index);
    if (rc == NVML_SUCCESS) {
        utilization->gpu = (unsigned int)field(value, "gpu", 0);
        utilization->memory = (unsigned int)field(value, "memory", 0);
    }
    return rc;
}

/* The gateway records this call under the window it asks for ("nvmlDeviceGetProcessUtilization(gpu0,last2s)"),
 * whatever the timestamp: the first recorded key for this device with any window answers. */
nvmlReturn_t DECLDIR nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
                                                     unsigned int *processSamplesCount,
                                                     unsigned long long lastSeenTimeStamp) {
    (void)lastSeenTimeStamp;
    DEVICE_CHECK(device);
    if (!processSamplesCount) return NVML_ERROR_INVALID_ARGUMENT;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "nvmlDeviceGetProcessUtilization(gpu%u,", device->index);
    const char *value = NULL;
    for (size_t i = 0; i < entry_count && !value; i++) {
        if (strncmp(entries[i].key, prefix, strlen(prefix)) == 0) value = entries[i].value;
    }
    if (!value) return NVML_ERROR_NOT_SUPPORTED;
    if (value[0] == '!') return (nvmlReturn_t)atoi(value + 1);
    unsigned int found = count_items(value, ';');
    if (!utilization || *processSamplesCount < found) {
        *processSamplesCount = found;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int i = 0;
    for (const char *p = value; *p; p = next_item(p, ';')) {
        utilization[i].pid = (unsigned int)field(p, "pid", 0);
        utilization[i].timeStamp = field(p, "timeStamp", 0);
        utilization[i].smUtil = (unsigned int)field(p, "smUtil", 0);
        utilization[i].memUtil = (unsigned int)field(p, "memUtil", 0);
        utilization[i].encUtil = (unsigned int)field(p, "encUtil", 0);
        utilization[i].decUtil = (unsigned int)field(p, "decUtil", 0);
        i++;
    }
    *processSamplesCount = found;
    return NVML_SUCCESS;
}

/* ---- health ---- */

DEVICE_TWO_NUMBERS(nvmlDeviceGetEccMode, nvmlEnableState_t)

nvmlReturn_t DECLDIR nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                 nvmlEccCounterType_t counterType, unsigned long long *eccCounts) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetTotalEccErrors(gpu%u,%d,%d)", device->index, (int)errorType,
                             (int)counterType);
    if (rc == NVML_SUCCESS) *eccCounts = number(value, 0);
    return rc;
}

nvmlReturn_t DECLDIR nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                               unsigned int *pageCount, unsigned long long *addresses) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetRetiredPages(gpu%u,%d)", device->index, (int)cause);
    if (rc != NVML_SUCCESS) return rc;
    unsigned int found = count_items(value, ' ');
    if (!fits(pageCount, found, addresses)) return NVML_ERROR_INSUFFICIENT_SIZE;
    for (unsigned int i = 0; i < found; i++) {
        addresses[i] = number(value, (int)i);
    }
    *pageCount = found;
    return NVML_SUCCESS;
}

DEVICE_NUMBER(nvmlDeviceGetRetiredPagesPendingStatus, nvmlEnableState_t)

nvmlReturn_t DECLDIR nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
                                               unsigned int *isPending, unsigned int *failureOccurred) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetRemappedRows(gpu%u)", device->index);
    if (rc == NVML_SUCCESS) {
        *corrRows = (unsigned int)number(value, 0);
        *uncRows = (unsigned int)number(value, 1);
        *isPending = (unsigned int)number(value, 2);
        *failureOccurred = (unsigned int)number(value, 3);
    }
    return rc;
}

DEVICE_NUMBER(nvmlDeviceGetCurrentClocksEventReasons, unsigned long long)
DEVICE_NUMBER(nvmlDeviceGetCurrentClocksThrottleReasons, unsigned long long)
DEVICE_ARG_NUMBER(nvmlDeviceGetTemperature, nvmlTemperatureSensors_t, unsigned int)
DEVICE_ARG_NUMBER(nvmlDeviceGetTemperatureThreshold, nvmlTemperatureThresholds_t, unsigned int)

nvmlReturn_t DECLDIR nvmlDeviceGetMarginTemperature(nvmlDevice_t device, nvmlMarginTemperature_t *marginTempInfo) {
    const char *value;
    DEVICE_CHECK(device);
    if (marginTempInfo->version != nvmlMarginTemperature_v1) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetMarginTemperature(gpu%u)", device->index);
    if (rc == NVML_SUCCESS) marginTempInfo->marginTemperature = (int)number(value, 0);
    return rc;
}

DEVICE_NUMBER(nvmlDeviceGetEnforcedPowerLimit, unsigned int)
DEVICE_NUMBER(nvmlDeviceGetPowerManagementDefaultLimit, unsigned int)
DEVICE_NUMBER(nvmlDeviceGetCurrPcieLinkGeneration, unsigned int)
DEVICE_NUMBER(nvmlDeviceGetMaxPcieLinkGeneration, unsigned int)
DEVICE_NUMBER(nvmlDeviceGetGpuMaxPcieLinkGeneration, unsigned int)
DEVICE_NUMBER(nvmlDeviceGetCurrPcieLinkWidth, unsigned int)
DEVICE_NUMBER(nvmlDeviceGetMaxPcieLinkWidth, unsigned int)
DEVICE_NUMBER(nvmlDeviceGetPcieReplayCounter, unsigned int)
DEVICE_ARG_NUMBER(nvmlDeviceGetNvLinkState, unsigned int, nvmlEnableState_t)
DEVICE_ARG_NUMBER(nvmlDeviceGetNvLinkVersion, unsigned int, unsigned int)
DEVICE_ARG_NUMBER(nvmlDeviceGetNvLinkRemoteDeviceType, unsigned int, nvmlIntNvLinkDeviceType_t)

nvmlReturn_t DECLDIR nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetNvLinkRemotePciInfo(gpu%u,%u)", device->index, link);
    if (rc == NVML_SUCCESS) fill_pci(value, pci);
    return rc;
}

nvmlReturn_t DECLDIR nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                                     nvmlNvLinkErrorCounter_t counter, unsigned long long *counterValue) {
    const char *value;
    DEVICE_CHECK(device);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetNvLinkErrorCounter(gpu%u,%u,%d)", device->index, link, (int)counter);
    if (rc == NVML_SUCCESS) *counterValue = number(value, 0);
    return rc;
}

/* ---- topology ---- */

nvmlReturn_t DECLDIR nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuP2PCapsIndex_t p2pIndex,
                                            nvmlGpuP2PStatus_t *p2pStatus) {
    const char *value;
    DEVICE_CHECK(device1);
    DEVICE_CHECK(device2);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetP2PStatus(gpu%u,gpu%u,%d)", device1->index, device2->index,
                             (int)p2pIndex);
    if (rc == NVML_SUCCESS) *p2pStatus = (nvmlGpuP2PStatus_t)number(value, 0);
    return rc;
}

nvmlReturn_t DECLDIR nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                         nvmlGpuTopologyLevel_t *pathInfo) {
    const char *value;
    DEVICE_CHECK(device1);
    DEVICE_CHECK(device2);
    nvmlReturn_t rc = answer(&value, "nvmlDeviceGetTopologyCommonAncestor(gpu%u,gpu%u)", device1->index,
                             device2->index);
    if (rc == NVML_SUCCESS) *pathInfo = (nvmlGpuTopologyLevel_t)number(value, 0);
    return rc;
}
