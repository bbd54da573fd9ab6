/*
 * trainhost plugin ABI, version 1.
 *
 * The one contract between the trainhost core and a callback plugin (.so). Plain C so
 * that no compiler's C++ ABI, exception or standard-library type ever crosses it.
 *
 * Versioning rule:
 *   - TH_ABI_MAJOR changes when an existing field, function signature or meaning
 *     changes. The host refuses a plugin whose major differs from its own.
 *   - TH_ABI_MINOR grows when a field is appended to the end of a struct, a status
 *     is added, or the host starts to check something that only plugins built
 *     against the new minor are held to (their entry's abi_minor says which). Every
 *     struct that can grow starts with `struct_size`; a reader only touches fields
 *     that lie inside the size the writer declared, so old plugins run on new hosts
 *     and new plugins detect old hosts (the SDK checks `th_host_api.struct_size`).
 *
 * Discovery: a plugin exports exactly one symbol, `trainhost_plugin_entry`, placed in
 * the ELF section `thplugin` (see TRAINHOST_PLUGIN in sdk.hpp). The host reads the
 * section table before loading, so a file without that section is refused without
 * running any of its code. The symbol is a function returning a pointer to constant
 * data describing the plugin.
 *
 * Errors: no C++ exception may cross this boundary. Every call returns a th_status;
 * hooks write a human-readable message into th_hook_result.message on failure.
 */
#ifndef TRAINHOST_ABI_H
#define TRAINHOST_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TH_ABI_MAJOR 1
#define TH_ABI_MINOR 12

/* The most epochs a run may have; th_train_state.max_epochs holds it where the run
 * set max_steps and no epochs (ABI 1.7), as Lightning's max_epochs = -1. */
#define TH_MAX_EPOCHS 1000000u

/* Name of the exported entry symbol and of the section holding it (ELF sections
 * that Boost.DLL reads are at most 8 bytes long). */
#define TH_ENTRY_SYMBOL "trainhost_plugin_entry"
#define TH_ENTRY_SECTION "thplugin"

typedef enum th_status {
    TH_OK = 0,
    TH_ERROR = 1,            /* generic failure; details in the message */
    TH_INVALID_ARGUMENT = 2, /* null pointer, unknown name, bad value */
    TH_OUT_OF_PHASE = 3,     /* host call not allowed in the current lifecycle phase */
    TH_OUT_OF_MEMORY = 4,    /* the device is out of memory, or the plugin over its budget */
    TH_INVALID_HANDLE = 5,   /* unknown, freed, reclaimed or foreign handle */
    TH_NOT_FOUND = 6,        /* metric or option does not exist */
    TH_UNSUPPORTED = 7,      /* not available on this backend or host version */
    TH_BUFFER_TOO_SMALL = 8,
    TH_UNDECLARED = 9 /* ABI 1.2: a change to something the plugin's `writes` does not declare */
} th_status;

/* What the core does after a hook returns TH_OK. Any other value was never part of
 * ABI 1: a host of any 1.x minor fails the hook that returns one. */
typedef enum th_control {
    TH_CONTINUE = 0,
    TH_SKIP_BATCH = 1, /* from batch_start: skip forward/backward/step of this batch;
                          from before_optimizer_step: skip the step. batch_end still runs. */
    TH_STOP_FIT = 2    /* finish the current batch and epoch_end, then end the fit */
} th_control;

/* Lifecycle hooks, in the order of docs/architecture.md. The numeric value is also
 * the phase reported to plugins while that hook runs. */
typedef enum th_hook {
    TH_HOOK_SETUP = 0,
    TH_HOOK_TO_DEVICE,
    TH_HOOK_FIT_START,
    TH_HOOK_EPOCH_START,
    TH_HOOK_BATCH_START,
    TH_HOOK_BEFORE_BACKWARD,
    TH_HOOK_AFTER_BACKWARD,
    TH_HOOK_BEFORE_OPTIMIZER_STEP,
    TH_HOOK_AFTER_OPTIMIZER_STEP,
    TH_HOOK_BATCH_END,
    TH_HOOK_VALIDATION_START,
    TH_HOOK_VAL_BATCH_START,
    TH_HOOK_VAL_BATCH_END,
    TH_HOOK_VALIDATION_END,
    TH_HOOK_EPOCH_END,
    TH_HOOK_FIT_END,
    TH_HOOK_TEARDOWN,
    TH_HOOK_EXCEPTION,
    TH_HOOK_COUNT
} th_hook;

typedef enum th_resource_kind {
    TH_RESOURCE_DEVICE_MEMORY = 0,
    TH_RESOURCE_PINNED_MEMORY = 1,
    TH_RESOURCE_STREAM = 2,
    TH_RESOURCE_EVENT = 3,
    TH_RESOURCE_BLAS_HANDLE = 4,
    TH_RESOURCE_DNN_HANDLE = 5
} th_resource_kind;

/* Lifetime of a lease. At the end of each scope every lease of that scope or a
 * narrower one must have been released. Ordered narrow to wide. */
typedef enum th_scope {
    TH_SCOPE_STEP = 0,
    TH_SCOPE_EPOCH = 1,
    TH_SCOPE_FIT = 2,
    TH_SCOPE_PLUGIN = 3, /* the plugin instance's life: create .. destroy */
    TH_SCOPE_SESSION = 4
} th_scope;

typedef enum th_log_level {
    TH_LOG_DEBUG = 0,
    TH_LOG_INFO = 1,
    TH_LOG_WARNING = 2,
    TH_LOG_ERROR = 3
} th_log_level;

/* A lease on a resource. `id` is never reused within a process, so a handle to a
 * released or reclaimed lease is recognised as such. `generation` and `reserved`
 * are the host's own: plugins copy handles verbatim. */
typedef struct th_handle {
    uint64_t id;
    uint32_t generation;
    uint32_t reserved;
} th_handle;

/* Opaque per-instance context the host passes back into every host call. */
typedef struct th_host th_host;

typedef struct th_hook_result {
    th_control control;
    /* NUL-terminated message, written by the plugin when it returns an error status
     * (or, optionally, a reason with TH_STOP_FIT). */
    char message[512];
} th_hook_result;

typedef struct th_train_state {
    uint32_t struct_size;
    th_hook phase;
    uint32_t fit_index;       /* 0-based, counts repeated fits in one process */
    uint32_t epoch;           /* 0-based current epoch */
    uint32_t max_epochs;      /* TH_MAX_EPOCHS where max_steps alone limits the fit */
    uint64_t batch_index;     /* within the epoch (train or validation loop) */
    uint64_t batches_in_epoch; /* of the loop now running */
    uint64_t global_step;     /* optimizer steps taken in this fit */
    uint64_t batch_size;      /* configured batch size */
    uint64_t batch_samples;   /* rows in the current batch (last may be short) */
    uint64_t samples_seen;    /* training samples processed in this epoch */
    uint64_t train_samples;   /* size of the training split */
    uint64_t seed;
    const char* device;       /* "cpu:0", "cuda:0" */
    const char* failure;      /* during on_exception: what went wrong; else NULL */
    /* ABI 1.1: during on_exception, the signal (SIGINT, SIGTERM) that interrupted the
     * run between two steps, else 0. A host of ABI 1.0 does not write it: read it only
     * when the struct_size train_state returned covers it. */
    uint32_t interrupt_signal;
    /* ABI 1.6: training batches to one optimizer step ([optimizer]
     * accumulate_grad_batches; 1 in predict mode). An epoch of B batches takes
     * ceil(B / it) steps. Read it only when the struct_size train_state returned
     * covers it: an older host does not write it (the SDK's state() zero-fills, so
     * read 0 as 1). */
    uint64_t accumulate_grad_batches;
    /* ABI 1.7: the optimizer steps after which the fit ends (max_steps), or 0 for
     * no such limit (0 in predict mode). The fit then ends after the batch whose
     * step reaches it, mid-epoch too; that epoch ends as a whole one does
     * (validated, then epoch_end). Read it only
     * when the struct_size train_state returned covers it: an older host does not
     * write it (the SDK's state() zero-fills: no limit). */
    uint64_t max_steps;
    /* ABI 1.8: the validation split is evaluated after the epochs whose 1-based
     * number this divides (check_val_every_n_epoch; 1 in predict mode). Above 1, a
     * monitor of a val_* metric acts where a validation ran (on_validation_end), as
     * Lightning's do: at other epoch ends the val_* metrics are the last
     * validation's. Read it only when the struct_size train_state returned covers
     * it: an older host does not write it (the SDK's state() zero-fills, so read 0
     * as 1). */
    uint64_t check_val_every_n_epoch;
    /* ABI 1.9: 1 while the sanity check runs (num_sanity_val_steps): a few
     * validation batches after fit_start, before the first epoch, with the
     * validation hooks, as Lightning's trainer.sanity_checking. Its val_* metrics
     * are dropped afterwards; a monitor must not act on them. Read it only when
     * the struct_size train_state returned covers it: an older host does not
     * write it (the SDK's state() zero-fills: no sanity check). Left at 1 in
     * on_exception and teardown where the sanity check itself failed. 64 bits, so
     * that no later field can fall into this one's padding. */
    uint64_t sanity_checking;
    /* ABI 1.10: the batches of a fast_dev_run (Lightning's), or 0: a quick check
     * of the fit, one epoch of at most this many training, validation and test
     * batches. As Lightning's checkpoint, early stopping and loggers do, a plugin
     * that writes files for later, or stops the fit, does neither while it is set:
     * the run checks the plugins' hooks and the ledger, not the model. Read it only
     * when the struct_size train_state returned covers it: an older host does not
     * write it (the SDK's state() zero-fills: off). */
    uint64_t fast_dev_run;
    /* ABI 1.11: 1 in a fit that resumes from a checkpoint (--resume), from setup to
     * teardown, else 0 (a fresh fit, one started from --weights, and the later fits
     * of --repeat): Lightning's ckpt_path given to fit. A plugin that appends to its
     * own files (a logger) tells a resume by it, which may stand at step 0, rather
     * than by the counters. Its saved state, if any, is loaded after setup. Read it
     * only when the struct_size train_state returned covers it: an older host does
     * not write it (the SDK's state() zero-fills: not resumed). */
    uint64_t resumed;
} th_train_state;

typedef struct th_param_info {
    uint32_t struct_size;
    uint64_t param_id; /* stable across device moves and fits of the same model */
    const char* name;  /* e.g. "dense0.weight"; valid until the plugin's teardown */
    uint64_t numel;
    uint32_t rank;
    uint64_t shape[4];
    /* Identifies the parameter's current storage; it changes whenever the core
     * moves the model. State keyed by it (rather than by param_id) goes stale. */
    uint64_t storage_id;
    const char* device; /* where the parameter lives now, e.g. "cpu:0" */
} th_param_info;

typedef enum th_option_type {
    TH_OPTION_BOOL = 0,
    TH_OPTION_INT = 1,
    TH_OPTION_FLOAT = 2,
    TH_OPTION_STRING = 3
} th_option_type;

/* One declared option. `default_value` is written as a TOML value literal
 * ("true", "3", "0.5", "\"val_loss\""), or NULL when the option is required. */
typedef struct th_option_spec {
    const char* name;
    th_option_type type;
    const char* default_value;
    const char* doc;
} th_option_spec;

/* The validated value of one option, parallel to the plugin's option specs.
 * String values live until create() returns. */
typedef struct th_option_value {
    th_option_type type;
    int64_t int_value;    /* INT and BOOL (0/1) */
    double float_value;   /* FLOAT */
    const char* string_value; /* STRING */
} th_option_value;

typedef struct th_owner_usage {
    uint32_t struct_size;
    const char* name;         /* "core" or the plugin's name; lives as long as the host */
    uint64_t leases;
    uint64_t bytes_in_use;    /* device memory, as requested */
    uint64_t bytes_reserved;  /* device and pinned memory after rounding, plus other kinds */
    uint64_t peak_bytes_in_use;
    /* ABI 1.3: device memory after the allocator's rounding (in_use <= allocated <=
     * reserved). Written only by a host whose th_host_api.abi_minor is 3 or more (a
     * 1.2 host leaves it, and struct_size, as the plugin set them); from 1.3 on the
     * host also sets struct_size to what it wrote. The SDK's owner_usages() sees to it. */
    uint64_t bytes_allocated;
} th_owner_usage;

/* Functions the host offers to a plugin. Each checks the caller's phase and
 * refuses a call out of phase with TH_OUT_OF_PHASE. */
typedef struct th_host_api {
    uint32_t struct_size;
    uint16_t abi_major;
    uint16_t abi_minor;

    /* Details of the last failed host call of this instance (never NULL). */
    const char* (*last_error)(th_host* host);

    void (*log)(th_host* host, th_log_level level, const char* message);

    th_status (*train_state)(th_host* host, th_train_state* out);

    /* Metrics: the core's (train_loss, val_loss, val_accuracy, ...) and plugins'.
     * metric_set refuses a key that is not UTF-8 text without control characters
     * (TH_INVALID_ARGUMENT). */
    th_status (*metric_get)(th_host* host, const char* key, double* out);
    th_status (*metric_set)(th_host* host, const char* key, double value);

    /* Ask the core to end the fit after the current epoch's end hooks. */
    th_status (*request_stop)(th_host* host, const char* reason);

    /* Model parameters, available in every hook from setup to teardown. */
    th_status (*param_count)(th_host* host, uint32_t* out);
    th_status (*param_info)(th_host* host, uint32_t index, th_param_info* out);
    th_status (*param_read)(th_host* host, uint32_t index, float* dst, uint64_t count);
    th_status (*param_write)(th_host* host, uint32_t index, const float* src, uint64_t count);

    /* Resources owned by this plugin instance. `bytes` is ignored for kinds that
     * are not memory. A lease must be released before its scope ends; for memory
     * kinds, release must name the size acquired (a mismatch is refused as misuse). */
    th_status (*acquire)(th_host* host, th_resource_kind kind, uint64_t bytes, th_scope scope,
                         const char* tag, th_handle* out);
    th_status (*release)(th_host* host, th_handle handle, uint64_t bytes);
    th_status (*promote)(th_host* host, th_handle handle, th_scope scope);
    /* Makes a device-memory lease state of a parameter: whenever the core moves the
     * model, the lease moves with it (same handle, new device). */
    th_status (*attach_to_param)(th_host* host, th_handle handle, uint32_t param_index);

    /* Device-agnostic access to a memory lease (device or pinned). */
    th_status (*copy_to_host)(th_host* host, th_handle src, uint64_t offset, void* dst,
                              uint64_t bytes);
    th_status (*copy_from_host)(th_host* host, th_handle dst, uint64_t offset, const void* src,
                                uint64_t bytes);

    /* Ordering objects. */
    th_status (*stream_synchronize)(th_host* host, th_handle stream);
    th_status (*event_record)(th_host* host, th_handle event, th_handle stream);
    th_status (*event_query)(th_host* host, th_handle event, int* complete);

    /* Ask the core to move the model (parameters, gradients, optimizer state and
     * attached plugin state, together) to `device` ("auto", "cpu", "cpu:1",
     * "cuda:0") once the current hook returns. Allowed in to_device, fit_start
     * and epoch_start. Moving to where the model already is does nothing. */
    th_status (*move_model)(th_host* host, const char* device);

    /* Metrics by position, for loggers: keys valid until the hook returns (or the
     * plugin's own metric_erase of that metric). */
    th_status (*metric_count)(th_host* host, uint32_t* out);
    th_status (*metric_at)(th_host* host, uint32_t index, const char** key, double* value);

    /* Memory held per owner (owner 0 is the core), for monitors. */
    th_status (*owner_count)(th_host* host, uint32_t* out);
    th_status (*owner_usage)(th_host* host, uint32_t owner, th_owner_usage* out);

    /* Tensor operations on parameters, on the device where the model lives.
     * Masks and copies are device-memory leases of exactly numel floats. */
    th_status (*param_copy_to)(th_host* host, uint32_t index, th_handle dst);   /* dst = param */
    th_status (*param_copy_from)(th_host* host, uint32_t index, th_handle src); /* param = src */
    th_status (*param_apply_mask)(th_host* host, uint32_t index, th_handle mask); /* param *= mask */
    /* mask[i] = 0 where |param[i]| <= threshold; other entries are kept as they are. */
    th_status (*param_mask_below)(th_host* host, uint32_t index, float threshold, th_handle mask);
    /* The k-th smallest |w| (1-based) over the given parameters' masked-in entries
     * (masks may be zero handles for "all entries"); 0 when k is 0. */
    th_status (*magnitude_threshold)(th_host* host, const uint32_t* indices, const th_handle* masks,
                                     uint32_t count, uint64_t k, float* out);
    th_status (*fill)(th_host* host, th_handle buffer, float value);

    /* During save_state: append bytes to this plugin's state record. */
    th_status (*state_write)(th_host* host, const void* bytes, uint64_t size);
    /* Write a checkpoint of the whole run (params, optimizer state, counters, RNG
     * state, every stateful plugin's state) to `path`, atomically. */
    th_status (*save_checkpoint)(th_host* host, const char* path, int weights_only);

    /* ABI 1.4; a host older than that offers a th_host_api whose struct_size ends
     * before these (the SDK checks). The gradients of the batch's backward pass, in
     * after_backward and before_optimizer_step: read (`count` is the parameter's
     * numel), and scaled in place by a finite factor, as clipping by norm does
     * (a change to "grads"). */
    th_status (*grad_read)(th_host* host, uint32_t index, float* dst, uint64_t count);
    th_status (*grad_scale)(th_host* host, uint32_t index, float factor);
    /* The optimizer's learning rate: read in any hook, set (a change to "lr") from
     * setup to epoch_end, in [0, 1000] as the config's, for the optimizer steps that
     * follow; TH_UNSUPPORTED where the fit failed before its optimizer was built.
     * Checkpoints save it; a resume starts from the saved one. */
    th_status (*lr_get)(th_host* host, double* out);
    th_status (*lr_set)(th_host* host, double lr);

    /* ABI 1.5. The batch in flight, as a prediction writer or a confusion matrix
     * needs it: the model's raw outputs (logits for cross_entropy and
     * bce_with_logits), rows x width row-major, and the batch's class labels. After
     * a training batch's forward pass (before_backward .. batch_end; not for a
     * skipped batch) and in val_batch_end (validation and predict mode). The shape
     * goes to *rows and *width (either may be NULL) first; a NULL dst or a count
     * below what the batch holds then fails with TH_BUFFER_TOO_SMALL, so a plugin
     * can size its buffer. label_read is TH_UNSUPPORTED for data without labels. */
    th_status (*output_read)(th_host* host, float* dst, uint64_t count, uint64_t* rows, uint64_t* width);
    th_status (*label_read)(th_host* host, int32_t* dst, uint64_t count, uint64_t* rows);

    /* ABI 1.12. Removes a metric, where metric_set may set it and as its declared
     * writes allow; one that does not exist is no error. A key metric_at gave for it
     * is invalid from then on. For a metric that no longer holds (a best score whose
     * ranking a resume discarded), which would otherwise stand as the saved run's. */
    th_status (*metric_erase)(th_host* host, const char* key);
} th_host_api;

/* A hook: every slot of the vtable has this signature. */
typedef th_status (*th_hook_fn)(void* instance, th_host* host, th_hook_result* result);

/* One slot per th_hook value; NULL means "nothing to do". */
typedef struct th_plugin_vtable {
    uint32_t struct_size;
    th_hook_fn hooks[TH_HOOK_COUNT];
    /* State for checkpoints, NULL for a stateless plugin. save_state writes through
     * host_api.state_write; load_state receives exactly the bytes saved, written by
     * a plugin of the same name and state_version. */
    th_status (*save_state)(void* instance, th_host* host, th_hook_result* result);
    th_status (*load_state)(void* instance, th_host* host, const void* bytes, uint64_t size,
                            th_hook_result* result);
} th_plugin_vtable;

typedef struct th_plugin_entry {
    uint32_t struct_size;
    uint16_t abi_major;
    uint16_t abi_minor;
    const char* name;        /* [a-z0-9_]+, unique among loaded plugins */
    const char* version;     /* the plugin's own version, free form */
    const char* description;

    const th_option_spec* options;
    uint32_t option_count;

    /* Ordering and access declarations, comma-separated names ("" for none):
     * plugins this one runs after/before, and what it reads/writes: "params",
     * "grads" and "lr" (ABI 1.4), "optimizer_state", "device", "metric:<key>",
     * "metric:<prefix>.*", and for reads "metrics" (every metric). From ABI 1.2 (an entry whose abi_minor is 2 or more)
     * the host refuses a load whose reads/writes name anything else, and refuses,
     * with TH_UNDECLARED, a call that changes what `writes` does not cover:
     * metric_set and metric_erase ("metric:<key>"), param_write, param_copy_from and param_apply_mask
     * ("params"), move_model ("device"), grad_scale ("grads"), lr_set ("lr").
     * Entries of ABI 1.0 and 1.1 only order. */
    const char* after;
    const char* before;
    const char* reads;
    const char* writes;

    /* Create an instance from validated options (parallel to `options`). On failure
     * return non-TH_OK and write the reason into result->message: TH_INVALID_ARGUMENT
     * when an option's value is refused (the host reports a configuration error, exit
     * 1), any other status when the plugin cannot start (exit 2). */
    th_status (*create)(const th_host_api* api, th_host* host, const th_option_value* values,
                        uint32_t value_count, void** instance, th_hook_result* result);
    /* Always called exactly once for each created instance, after teardown. */
    void (*destroy)(void* instance);

    const th_plugin_vtable* vtable;

    /* Version of the plugin's saved state; a checkpoint holding another version is
     * refused for this plugin with both versions named. */
    uint32_t state_version;
} th_plugin_entry;

/* Signature of the exported entry function. */
typedef const th_plugin_entry* (*th_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* TRAINHOST_ABI_H */
